import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { CoalescingBuffer } from '../../lib/coalescing-buffer'

const FLUSH_INTERVAL_MS = 5000
/**
 * Sources per statement, and the pause between two statements of one flush. One statement for all
 * (5,000 sources per 5 s at 1,000 requests/s over 10,000 sources) kept a PostgreSQL backend busy
 * for up to 54 ms every 5 s, on a 2-core machine next to the lead path's statement: about 1% of
 * requests, the p99 of the open-loop benchmark, waited behind it (bench:stalls, docs/benchmarks.md
 * "the last-request flush paced"). Paced, each statement is a few milliseconds and the flush
 * spreads over at most half the interval (FLUSH_SPREAD_MS); the statements' fixed cost is paid a
 * few more times per interval, the rows written are the same.
 */
export const LAST_REQUEST_CHUNK = 1000
const CHUNK_PAUSE_MS = 250
const FLUSH_SPREAD_MS = FLUSH_INTERVAL_MS / 2

/** The pause after each statement of a flush of `chunks` statements (none after the last). */
export function chunkPauseMs(chunks: number): number {
  if (chunks <= 1) return 0
  return Math.min(CHUNK_PAUSE_MS, FLUSH_SPREAD_MS / (chunks - 1))
}

/**
 * webhook_sources.last_request_at, kept to within FLUSH_INTERVAL_MS without touching the source row
 * on the request path: each replica notes the latest request per source in memory and writes them
 * per interval (and on shutdown, at once), LAST_REQUEST_CHUNK sources per statement, paced
 * (chunkPauseMs). A later time never goes backwards: the update only moves the column forward,
 * whichever replica writes last. A chunk that fails puts the whole batch back (rewriting the chunks
 * already written is harmless: the same times, and never backwards).
 */
export class LastRequestRecorder {
  private readonly latest: CoalescingBuffer<number>

  constructor(ctx: AppContext, options: { chunkSize?: number } = {}) {
    const chunkSize = options.chunkSize ?? LAST_REQUEST_CHUNK
    this.latest = new CoalescingBuffer<number>({
      intervalMs: FLUSH_INTERVAL_MS,
      merge: Math.max,
      // A set-based update (one row per source): a `sql` template, not the builder
      // (docs/architecture.md "Speaking SQL"); the pairs travel as one JSON parameter, the times as
      // epoch milliseconds (no Date and ISO string per source; two array parameters instead cost
      // postgres.js more to serialise, measured). Once per interval, so not a prepared hot statement.
      write: async (batch, { final }) => {
        const startedAt = Date.now()
        const started = performance.now()
        const entries = [...batch]
        let buildMs = 0
        const pause = final ? 0 : chunkPauseMs(Math.ceil(entries.length / chunkSize))
        for (let from = 0; from < entries.length; from += chunkSize) {
          if (from > 0 && pause > 0) await Bun.sleep(pause)
          const building = performance.now()
          const json = JSON.stringify(entries.slice(from, from + chunkSize).map(([id, at]) => ({ id, at })))
          buildMs += performance.now() - building
          const statement = sql`update webhook_sources s set last_request_at = to_timestamp(v.at / 1000)
            from jsonb_to_recordset(${json}::jsonb) as v(id uuid, at float8)
            where s.id = v.id and (s.last_request_at is null or s.last_request_at < to_timestamp(v.at / 1000))`
          await sqlRows(ctx.db, statement)
        }
        if (ctx.config.diagnoseStalls) {
          // The same line as a periodic job's (src/lib/stall-probe.ts): the builds are event-loop time.
          ctx.logger.info('job run', {
            job: 'last-request flush',
            at: startedAt,
            duration_ms: Math.round((performance.now() - started) * 10) / 10,
            loop_blocked_ms: Math.round(buildMs * 10) / 10,
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
