import type { AppContext } from '../../context'
import { perContext } from '../../lib/memo'

export const DELIVERIES_CHANNEL = 'lead_capture_webhook_due'

/**
 * Wakes the delivery worker when deliveries become due, so a new event goes out at once rather than
 * at the next poll. In-process for events written by this replica (the lead path: no NOTIFY inside
 * its transaction, which would serialise commits on PostgreSQL's notification queue lock), and
 * through NOTIFY for the rarer events of the management API, so every replica's worker can take them.
 */
export class DeliverySignal {
  private readonly listeners = new Set<() => void>()

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** This replica's worker only. */
  wake(): void {
    for (const listener of this.listeners) listener()
  }

  /** Every replica's worker; a failed NOTIFY is left to their poll. */
  async announce(ctx: AppContext): Promise<void> {
    this.wake()
    try {
      await ctx.database.notify(DELIVERIES_CHANNEL, '')
    } catch (error) {
      ctx.logger.warn('webhook wake-up not announced; other replicas will poll', { error })
    }
  }
}

export const deliverySignal = perContext((_ctx: AppContext) => new DeliverySignal())
