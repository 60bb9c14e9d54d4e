import type { AppContext } from '../../context'
import type { PeriodicJob } from '../../lib/periodic'
import { purgeExpiredLogs } from './retention'
import { rollupDeliveryLogs } from './rollup'

export const ROLLUP_INTERVAL_MS = 60_000
export const PURGE_INTERVAL_MS = 3_600_000
const FIRST_ROLLUP_DELAY_MS = 5_000
const FIRST_PURGE_DELAY_MS = 30_000

/** Upkeep of the delivery logs: the health roll-up every minute, the retention purge every hour. */
export function deliveryLogJobs(ctx: AppContext): PeriodicJob[] {
  return [
    {
      name: 'delivery-log roll-up',
      firstDelayMs: FIRST_ROLLUP_DELAY_MS,
      intervalMs: ROLLUP_INTERVAL_MS,
      run: () => rollupDeliveryLogs(ctx),
    },
    {
      name: 'log retention',
      firstDelayMs: FIRST_PURGE_DELAY_MS,
      intervalMs: PURGE_INTERVAL_MS,
      run: (shouldStop) => purgeExpiredLogs(ctx, ctx.clock.now(), { shouldStop }),
    },
  ]
}
