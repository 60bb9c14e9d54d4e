import type { AppContext } from '../../context'
import type { PeriodicJob } from '../../lib/periodic'
import type { DeliveryLogsService } from '../delivery-logs/service'
import { announceExpiringTokens, announceSourceStatusChanges } from './events'
import { purgeExpiredMessages } from './retention'
import type { WebhookEndpointsService } from './service'
import { type DeliveryWorker, POLL_INTERVAL_MS } from './worker'

const SOURCE_STATUS_INTERVAL_MS = 60_000
const PAT_EXPIRY_INTERVAL_MS = 3_600_000

/**
 * Outbound webhooks' periodic work. The delivery poll is the fallback of the worker's wake-ups (a
 * lost NOTIFY, a lease that ran out on another replica, a retry whose time has come); the two scans
 * write the events that no request causes (a source's health changing, a token nearing expiry).
 */
export function webhookJobs(
  ctx: AppContext,
  services: {
    deliveryWorker: DeliveryWorker
    deliveryLogs: DeliveryLogsService
    webhookEndpoints: WebhookEndpointsService
  },
): PeriodicJob[] {
  const { deliveryWorker: worker, deliveryLogs: health, webhookEndpoints: service } = services
  return [
    {
      name: 'webhook deliveries',
      firstDelayMs: POLL_INTERVAL_MS,
      intervalMs: POLL_INTERVAL_MS,
      run: async () => worker.wake(),
    },
    {
      name: 'source.status_changed events',
      firstDelayMs: 15_000,
      intervalMs: SOURCE_STATUS_INTERVAL_MS,
      run: (shouldStop) => announceSourceStatusChanges(ctx, { health, service }, { shouldStop }),
    },
    {
      name: 'pat.expiring events',
      firstDelayMs: 20_000,
      intervalMs: PAT_EXPIRY_INTERVAL_MS,
      run: () => announceExpiringTokens(ctx, service),
    },
    {
      name: 'webhook message retention',
      firstDelayMs: 45_000,
      intervalMs: PAT_EXPIRY_INTERVAL_MS,
      run: (shouldStop) => purgeExpiredMessages(ctx, ctx.clock.now(), { shouldStop }),
    },
  ]
}
