import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { CoalescingBuffer } from '../../lib/coalescing-buffer'

const FLUSH_INTERVAL_MS = 5000

/**
 * webhook_sources.last_request_at, kept to within FLUSH_INTERVAL_MS without touching the source row
 * on the request path: each replica notes the latest request per source in memory and writes them
 * all in one statement per interval (and on shutdown). A later time never goes backwards: the
 * update only moves the column forward, whichever replica writes last.
 */
export class LastRequestRecorder {
  private readonly latest: CoalescingBuffer<number>

  constructor(ctx: AppContext) {
    this.latest = new CoalescingBuffer<number>({
      intervalMs: FLUSH_INTERVAL_MS,
      merge: Math.max,
      // A set-based update (one row per source): a `sql` template, not the builder
      // (docs/architecture.md "Speaking SQL"); the pairs travel as one JSON parameter. Once per
      // interval, so not a prepared hot statement.
      write: async (batch) => {
        const startedAt = Date.now()
        const started = performance.now()
        const latest = [...batch].map(([id, at]) => ({ id, at: new Date(at).toISOString() }))
        const json = JSON.stringify(latest)
        const built = performance.now()
        await sqlRows(
          ctx.db,
          sql`update webhook_sources s set last_request_at = v.at
            from jsonb_to_recordset(${json}::jsonb) as v(id uuid, at timestamptz)
            where s.id = v.id and (s.last_request_at is null or s.last_request_at < v.at)`,
        )
        if (ctx.config.diagnoseStalls) {
          // The same line as a periodic job's (src/lib/stall-probe.ts): its build is event-loop time.
          ctx.logger.info('job run', {
            job: 'last-request flush',
            at: startedAt,
            duration_ms: Math.round((performance.now() - started) * 10) / 10,
            loop_blocked_ms: Math.round((built - started) * 10) / 10,
            sources: batch.size,
          })
        }
      },
      // Kept for the next interval; a newer time noted meanwhile wins.
      onWriteError: (error, sources) =>
        ctx.logger.warn('could not record last request times; will retry', { error, sources }),
    })
  }

  note(sourceId: string, at: number): void {
    this.latest.add(sourceId, at)
  }

  flush(): Promise<void> {
    return this.latest.flush()
  }

  stop(): Promise<void> {
    return this.latest.stop()
  }
}
