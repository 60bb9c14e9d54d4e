import type { AppContext } from '../../context'

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
  private latest = new Map<string, number>()
  private timer: ReturnType<typeof setInterval> | undefined
  private flushing: Promise<void> | undefined

  constructor(private readonly ctx: AppContext) {
    ctx.onClose(() => this.stop())
  }

  note(sourceId: string, at: number): void {
    const known = this.latest.get(sourceId)
    if (known === undefined || at > known) this.latest.set(sourceId, at)
    if (!this.timer) {
      this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS)
      this.timer.unref?.()
    }
  }

  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async write(): Promise<void> {
    if (this.latest.size === 0) return
    const batch = this.latest
    this.latest = new Map()
    try {
      await this.ctx.database.query(UPDATE_SQL, [
        `{${[...batch.keys()].join(',')}}`,
        `{${[...batch.values()].map((at) => `"${new Date(at).toISOString()}"`).join(',')}}`,
      ])
    } catch (error) {
      // Kept for the next interval; a newer time noted meanwhile wins.
      this.ctx.logger.warn('could not record last request times; will retry', { error, sources: batch.size })
      for (const [sourceId, at] of batch) this.note(sourceId, at)
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    await this.flush()
  }
}
