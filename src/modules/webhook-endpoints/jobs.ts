import type { AppContext } from '../../context'
import type { PeriodicJob } from '../../lib/periodic'
import { deliveryWorker, POLL_INTERVAL_MS } from './worker'

/**
 * Outbound webhooks' periodic work. The delivery poll is the fallback of the worker's wake-ups (a
 * lost NOTIFY, a lease that ran out on another replica, a retry whose time has come).
 */
export function webhookJobs(ctx: AppContext): PeriodicJob[] {
  const worker = deliveryWorker(ctx)
  return [
    {
      name: 'webhook deliveries',
      firstDelayMs: POLL_INTERVAL_MS,
      intervalMs: POLL_INTERVAL_MS,
      run: async () => worker.wake(),
    },
  ]
}
