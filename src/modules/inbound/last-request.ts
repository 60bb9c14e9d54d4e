import type { AppContext } from '../../context'
import { CoalescingBuffer } from '../../lib/coalescing-buffer'

const FLUSH_INTERVAL_MS = 5000
const UPDATE_SQL = `update webhook_sources s set last_request_at = v.at
  from (select unnest($1::uuid[]) as id, unnest($2::timestamptz[]) as at) v
  where s.id = v.id and (s.last_request_at is null or s.last_request_at < v.at)`

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
      write: async (batch) => {
        await ctx.database.query(UPDATE_SQL, [
          `{${[...batch.keys()].join(',')}}`,
          `{${[...batch.values()].map((at) => `"${new Date(at).toISOString()}"`).join(',')}}`,
        ])
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
