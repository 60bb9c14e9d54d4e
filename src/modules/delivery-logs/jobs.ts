import type { AppContext } from '../../context'
import { purgeExpiredLogs } from './retention'
import { rollupDeliveryLogs } from './rollup'

export const ROLLUP_INTERVAL_MS = 60_000
export const PURGE_INTERVAL_MS = 3_600_000
const FIRST_ROLLUP_DELAY_MS = 5_000
const FIRST_PURGE_DELAY_MS = 30_000

/**
 * Background upkeep of the delivery logs, started by src/index.ts (tests call the jobs directly):
 * the health roll-up every minute and the retention purge every hour, each first run shortly after
 * start. A run never overlaps the previous one; failures are logged and retried on the next tick.
 * Stopped on shutdown: timers cleared, a purge in progress stops after its current batch.
 */
export function startDeliveryLogMaintenance(ctx: AppContext): void {
  let stopped = false
  const running = new Set<Promise<unknown>>()
  const schedule = (name: string, firstDelayMs: number, intervalMs: number, job: () => Promise<unknown>) => {
    let busy = false
    const tick = () => {
      if (busy || stopped) return
      busy = true
      const run = job()
        .catch((error) => ctx.logger.warn(`${name} failed; retrying on the next tick`, { error }))
        .finally(() => {
          busy = false
          running.delete(run)
        })
      running.add(run)
    }
    const first = setTimeout(tick, firstDelayMs)
    const every = setInterval(tick, intervalMs)
    first.unref?.()
    every.unref?.()
    return () => {
      clearTimeout(first)
      clearInterval(every)
    }
  }
  const timers = [
    schedule('delivery-log roll-up', FIRST_ROLLUP_DELAY_MS, ROLLUP_INTERVAL_MS, () =>
      rollupDeliveryLogs(ctx),
    ),
    schedule('log retention', FIRST_PURGE_DELAY_MS, PURGE_INTERVAL_MS, () =>
      purgeExpiredLogs(ctx, ctx.clock.now(), { shouldStop: () => stopped }),
    ),
  ]
  ctx.onClose(async () => {
    stopped = true
    for (const clear of timers) clear()
    await Promise.allSettled([...running])
  })
}
