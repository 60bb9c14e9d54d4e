/**
 * Wakes this replica's delivery worker when it wrote something due, so an event goes out at once
 * rather than at the next poll: after an ingest group with events, and after the management API or a
 * job queued messages. In process only. NOTIFY inside the lead transaction would serialise every
 * commit on PostgreSQL's notification queue lock, and a LISTEN for the worker would open a
 * connection per replica at start-up that nothing else needs yet; the replica that writes an event
 * sends it, and every replica's one-second poll picks up the rest (retries, leases that ran out).
 */
export class DeliverySignal {
  private readonly listeners = new Set<() => void>()

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  wake(): void {
    for (const listener of this.listeners) listener()
  }
}
