export interface CoalescingBufferOptions<Value> {
  intervalMs: number
  /** Combines two values noted under one key; `earlier` was noted first. */
  merge(earlier: Value, later: Value): Value
  /**
   * Writes a batch; a rejection puts the batch back for the next interval. `final`: the write of
   * stop() (shutdown), which should not take its time.
   */
  write(batch: Map<string, Value>, options: { final: boolean }): Promise<void>
  /** Called when a write fails (the batch is kept). */
  onWriteError(error: unknown, size: number): void
  /** Beyond this many keys, new keys are dropped (and reported) while old ones keep merging. */
  maxKeys?: number
  onDrop?(key: string): void
}

/**
 * Values noted in memory by key, merged while they wait, and written together once per interval
 * and on shutdown: work that must leave the request path (a per-source time, a count of refused
 * requests) costs one statement per interval instead of one per request. One write at a time;
 * a failed batch is merged back under whatever was noted meanwhile and retried on the next tick.
 * Every buffer of the service is listed in src/jobs.ts, which stops (flushes) them on shutdown.
 */
export class CoalescingBuffer<Value> {
  private pending = new Map<string, Value>()
  private timer: ReturnType<typeof setInterval> | undefined
  private flushing: Promise<void> | undefined

  constructor(private readonly options: CoalescingBufferOptions<Value>) {}

  add(key: string, value: Value): void {
    const earlier = this.pending.get(key)
    if (earlier !== undefined) {
      this.pending.set(key, this.options.merge(earlier, value))
      return
    }
    if (this.options.maxKeys !== undefined && this.pending.size >= this.options.maxKeys) {
      this.options.onDrop?.(key)
      return
    }
    this.pending.set(key, value)
    if (!this.timer) {
      this.timer = setInterval(() => void this.flush(), this.options.intervalMs)
      this.timer.unref?.()
    }
  }

  /** Writes what is pending; resolves when that write has finished or failed. */
  flush(options: { final: boolean } = { final: false }): Promise<void> {
    this.flushing ??= this.writePending(options).finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async writePending(options: { final: boolean }): Promise<void> {
    if (this.pending.size === 0) return
    const batch = this.pending
    this.pending = new Map()
    try {
      await this.options.write(batch, options)
    } catch (error) {
      this.options.onWriteError(error, batch.size)
      for (const [key, value] of batch) {
        const noted = this.pending.get(key)
        // A value noted since the batch was taken stays the base; the failed one is merged into it.
        this.pending.set(key, noted === undefined ? value : this.options.merge(noted, value))
      }
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    // A paced write of the last tick may be under way: let it end, then write the rest at once.
    await this.flushing
    await this.flush({ final: true })
  }
}
