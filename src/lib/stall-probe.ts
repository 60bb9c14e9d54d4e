import { heapSize } from 'bun:jsc'
import type { Logger } from './logger'

/** How often the probe's timer is due; a turn of the event loop longer than this delays it. */
export const PROBE_INTERVAL_MS = 5
/** A delay at least this long is logged as a stall (1,000 requests/s leave about 1 ms per request). */
export const STALL_LOG_MS = 3

export interface LoopMark {
  /** Sum of the probe's delays so far, in ms: time the event loop could not run a due timer. */
  blockedMs: number
  ticks: number
}

/**
 * A drift probe of the event loop, started only when DIAGNOSE_STALLS is set (bench/stall-timeline.ts):
 * a timer due every PROBE_INTERVAL_MS measures how late it runs. Bun exposes no GC events, so a fall
 * of the JS heap's size between two ticks marks a collection in that interval (a stall with `gc`).
 * Periodic jobs read `mark()` before and after a run to report the blocking seen while they ran
 * (their own when the replica is idle, as bench/job-stalls.ts runs them).
 */
export class EventLoopProbe {
  private timer: ReturnType<typeof setInterval> | undefined
  private blockedMs = 0
  private ticks = 0
  private maxDelayMs = 0

  constructor(private readonly logger: Logger) {}

  start(): this {
    let last = performance.now()
    let heap = heapSize()
    this.timer = setInterval(() => {
      const now = performance.now()
      const delay = Math.max(0, now - last - PROBE_INTERVAL_MS)
      const heapNow = heapSize()
      last = now
      this.ticks++
      this.blockedMs += delay
      if (delay > this.maxDelayMs) this.maxDelayMs = delay
      if (delay >= STALL_LOG_MS) {
        this.logger.info('event loop stalled', {
          // Epoch ms of when the late tick was due: the stall spans [at, at + delay_ms].
          at: Math.round(performance.timeOrigin + now - delay),
          delay_ms: Math.round(delay * 10) / 10,
          gc: heapNow < heap,
          heap_mb: Math.round(heapNow / 1e5) / 10,
        })
      }
      heap = heapNow
    }, PROBE_INTERVAL_MS)
    this.timer.unref?.()
    return this
  }

  mark(): LoopMark {
    return { blockedMs: this.blockedMs, ticks: this.ticks }
  }

  /** The largest delay since the last call (and resets it). */
  takeMaxDelayMs(): number {
    const max = this.maxDelayMs
    this.maxDelayMs = 0
    return max
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }
}

/**
 * Times one run of background work and logs it with the event-loop blocking seen meanwhile:
 * `job run` lines are what bench/stall-timeline.ts lines up with slow requests.
 */
export async function timedRun<T>(
  probe: EventLoopProbe,
  logger: Logger,
  job: string,
  run: () => Promise<T>,
): Promise<T> {
  const startedAt = Date.now()
  const started = performance.now()
  const before = probe.mark()
  probe.takeMaxDelayMs()
  try {
    return await run()
  } finally {
    const after = probe.mark()
    logger.info('job run', {
      job,
      at: startedAt,
      duration_ms: Math.round((performance.now() - started) * 10) / 10,
      loop_blocked_ms: Math.round((after.blockedMs - before.blockedMs) * 10) / 10,
      loop_max_delay_ms: Math.round(probe.takeMaxDelayMs() * 10) / 10,
    })
  }
}
