import type { AppContext } from '../../context'
import { CoalescingBuffer } from '../../lib/coalescing-buffer'
import type { DeliveryLogEntry, DeliveryLogWriter } from '../delivery-logs/log-writer'

const FLUSH_INTERVAL_MS = 1000
// If the database stays down, counts for more distinct keys than this are dropped (and logged).
const MAX_PENDING_GROUPS = 10_000

interface PendingGroup {
  entry: DeliveryLogEntry
  count: number
}

/**
 * A flood of rejections that are not worth a row each (429s, traffic to a disabled source over its
 * limit) is counted in memory and written once a second per (source, status, reason) as one
 * delivery-log row whose `repeat_count` says how many requests it stands for. The row keeps the
 * first request's time, client and body size as a sample. Pending counts are flushed on shutdown.
 */
export class RejectionAggregator {
  private readonly groups: CoalescingBuffer<PendingGroup>

  constructor(ctx: AppContext, deliveryLogs: DeliveryLogWriter) {
    this.groups = new CoalescingBuffer<PendingGroup>({
      intervalMs: FLUSH_INTERVAL_MS,
      merge: (first, next) => ({ entry: first.entry, count: first.count + next.count }),
      write: (batch) =>
        deliveryLogs.write([...batch.values()].map(({ entry, count }) => ({ ...entry, repeatCount: count }))),
      onWriteError: (error, groups) =>
        ctx.logger.warn('could not write aggregated rejections; will retry', { error, groups }),
      maxKeys: MAX_PENDING_GROUPS,
      onDrop: (key) =>
        ctx.logger.warn('rejection counts dropped: too many pending groups', {
          source_id: key.split('|')[0],
        }),
    })
  }

  add(entry: DeliveryLogEntry): void {
    this.groups.add(`${entry.sourceId}|${entry.httpStatus}|${entry.reason}`, { entry, count: 1 })
  }

  /** Writes what is pending. On failure the counts are put back and retried on the next tick. */
  flush(): Promise<void> {
    return this.groups.flush()
  }

  stop(): Promise<void> {
    return this.groups.stop()
  }
}
