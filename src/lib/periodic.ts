import type { AppContext } from '../context'
import { type EventLoopProbe, timedRun } from './stall-probe'

export interface PeriodicJob {
  name: string
  firstDelayMs: number
  intervalMs: number
  run(shouldStop: () => boolean): Promise<unknown>
}

/**
 * Background jobs of a replica (listed in src/jobs.ts, started by src/index.ts; tests call the jobs
 * directly): each first runs shortly after start, then every interval. A run never overlaps the
 * previous one; failures are logged and retried on the next tick. The returned stop clears the
 * timers and awaits the runs in progress (a long job checks `shouldStop` between its steps).
 * With a `probe` (DIAGNOSE_STALLS), every run is logged with its duration and the event-loop
 * blocking seen while it ran.
 */
export function startPeriodicJobs(
  ctx: AppContext,
  jobs: PeriodicJob[],
  probe?: EventLoopProbe,
): () => Promise<void> {
  let stopped = false
  const shouldStop = () => stopped
  const running = new Set<Promise<unknown>>()
  const timers = jobs.map(({ name, firstDelayMs, intervalMs, run }) => {
    let busy = false
    const tick = () => {
      if (busy || stopped) return
      busy = true
      const started = probe ? timedRun(probe, ctx.logger, name, () => run(shouldStop)) : run(shouldStop)
      const pending = started
        .catch((error) => ctx.logger.warn(`${name} failed; retrying on the next tick`, { error }))
        .finally(() => {
          busy = false
          running.delete(pending)
        })
      running.add(pending)
    }
    const first = setTimeout(tick, firstDelayMs)
    const every = setInterval(tick, intervalMs)
    first.unref?.()
    every.unref?.()
    return () => {
      clearTimeout(first)
      clearInterval(every)
    }
  })
  return async () => {
    stopped = true
    for (const clear of timers) clear()
    await Promise.allSettled([...running])
  }
}
