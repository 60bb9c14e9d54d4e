import type { AppContext } from '../../context'

/**
 * Wakes this replica's delivery worker when it wrote something due, so an event goes out at once
 * rather than at the next poll: after an ingest group with events, and after the management API or a
 * job queued messages. In process; the worker relays each wake to the other replicas (ReplicaWakeups
 * below), after the write committed. Not a NOTIFY inside the lead transaction: that would serialise
 * every commit on PostgreSQL's notification queue lock.
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

/** The channel on which replicas tell each other that deliveries are due. */
export const DELIVERY_CHANNEL = 'lead_capture_webhook_due'
/**
 * At most one NOTIFY per this many milliseconds per replica: at 1,000 leads/s the lead path's wake
 * fires for nearly every group commit, and one NOTIFY each would be hundreds of statements a second
 * (each taking PostgreSQL's notification queue lock at commit) for what one per window says as well.
 */
export const NOTIFY_COALESCE_MS = 50

/**
 * Wakes the other replicas' workers when this one wrote something due, over PostgreSQL
 * LISTEN/NOTIFY. The LISTEN shares the replica's one listener connection with the source cache
 * (postgres.js keeps one connection for every channel of a client), so a replica still holds
 * `DATABASE_POOL_SIZE + 1` connections. The NOTIFY is sent after the write committed, from the
 * pool, never awaited by the write: the lead path gains no round trip. It is coalesced: the first
 * wake of a quiet replica is sent at once, the wakes of the next NOTIFY_COALESCE_MS become one more
 * NOTIFY at the end of that window, so the last event of a burst is announced too.
 *
 * Embedded PGlite is one process: its in-process wake reaches its only worker, so nothing is sent.
 */
export class ReplicaWakeups {
  /** The payload of this replica's NOTIFYs: its own come back to it and are ignored. */
  private readonly replicaId = crypto.randomUUID()
  private listening: Promise<void> | undefined
  private lastSentAt = Number.NEGATIVE_INFINITY
  private trailing: ReturnType<typeof setTimeout> | undefined
  private closed = false

  constructor(
    private readonly ctx: AppContext,
    /** Called when another replica announced deliveries, and when the listener (re)connected. */
    private readonly onWake: () => void,
    /** Whether there is anything to be woken for: an enabled endpoint anywhere. */
    private readonly worthListening: () => Promise<boolean>,
  ) {}

  private get enabled(): boolean {
    return this.ctx.database.engine === 'postgres' && !this.closed
  }

  /**
   * LISTENs once, from the first call that finds an enabled endpoint in the database: until then
   * there is nothing to be woken for, and the listener connection (opened by the source cache only
   * when the replica serves a lead) is not opened for nothing, so a service without outbound
   * webhooks holds the connections it held before. A failure (database down at start-up) is logged;
   * every worker poll calls this again, the poll covering for the wake-ups meanwhile.
   */
  listen(): Promise<void> {
    if (!this.enabled) return Promise.resolve()
    this.listening ??= this.subscribe().catch((error) => {
      this.listening = undefined
      this.ctx.logger.warn('webhook wake-ups not listened to; polling meanwhile', { error })
    })
    return this.listening
  }

  private async subscribe(): Promise<void> {
    if (!(await this.worthListening())) {
      this.listening = undefined
      return
    }
    await this.ctx.database.listen(
      DELIVERY_CHANNEL,
      (payload) => {
        if (payload !== this.replicaId && !this.closed) this.onWake()
      },
      // Notifications sent while the listener was down are lost: look for due work now.
      () => {
        if (!this.closed) this.onWake()
      },
    )
  }

  /** This replica committed deliveries that are due: tell the others, at most once per window. */
  announce(): void {
    if (!this.enabled || this.trailing) return
    const wait = this.lastSentAt + NOTIFY_COALESCE_MS - performance.now()
    if (wait <= 0) {
      this.send()
      return
    }
    this.trailing = setTimeout(() => {
      this.trailing = undefined
      if (this.enabled) this.send()
    }, wait)
  }

  close(): void {
    this.closed = true
    clearTimeout(this.trailing)
    this.trailing = undefined
  }

  private send(): void {
    this.lastSentAt = performance.now()
    this.ctx.database.notify(DELIVERY_CHANNEL, this.replicaId).catch((error) => {
      // The other replicas' polls still find the work, a second later.
      this.ctx.logger.debug('webhook wake-up not sent', { error })
    })
  }
}
