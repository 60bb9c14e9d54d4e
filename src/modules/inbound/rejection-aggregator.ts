import type { AppContext } from '../../context'
import type { DeliveryLogEntry, InboundRepository } from './repository'

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
  private pending = new Map<string, PendingGroup>()
  private timer: ReturnType<typeof setInterval> | undefined
  private flushing: Promise<void> | undefined

  constructor(
    private readonly ctx: AppContext,
    private readonly repository: InboundRepository,
  ) {
    ctx.onClose(() => this.stop())
  }

  add(entry: DeliveryLogEntry): void {
    const key = `${entry.sourceId}|${entry.httpStatus}|${entry.reason}`
    const group = this.pending.get(key)
    if (group) {
      group.count++
      return
    }
    if (this.pending.size >= MAX_PENDING_GROUPS) {
      this.ctx.logger.warn('rejection counts dropped: too many pending groups', { source_id: entry.sourceId })
      return
    }
    this.pending.set(key, { entry, count: 1 })
    this.timer ??= setInterval(() => void this.flush(), FLUSH_INTERVAL_MS)
    this.timer.unref?.()
  }

  /** Writes what is pending. On failure the counts are put back and retried on the next tick. */
  flush(): Promise<void> {
    this.flushing ??= this.writePending().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async writePending(): Promise<void> {
    if (this.pending.size === 0) return
    const batch = this.pending
    this.pending = new Map()
    try {
      await this.repository.insertLogs(
        [...batch.values()].map(({ entry, count }) => ({ ...entry, repeatCount: count })),
      )
    } catch (error) {
      this.ctx.logger.warn('could not write aggregated rejections; will retry', { error, groups: batch.size })
      for (const [key, group] of batch) {
        const newer = this.pending.get(key)
        if (newer) newer.count += group.count
        else this.pending.set(key, group)
      }
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    await this.flush()
  }
}
