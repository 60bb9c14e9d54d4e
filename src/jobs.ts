import type { AppContext } from './context'
import { refreshPlannerStatistics, STATISTICS_CHECK_INTERVAL_MS } from './db/planner-statistics'
import { type PeriodicJob, startPeriodicJobs } from './lib/periodic'
import { EventLoopProbe } from './lib/stall-probe'
import { deliveryLogJobs } from './modules/delivery-logs/jobs'
import { webhookJobs } from './modules/webhook-endpoints/jobs'
import type { Services } from './services'

/**
 * All the work a replica does outside requests, in one list (docs/architecture.md, "Background
 * work"). Three kinds:
 *  - write-behind buffers: noted on the request path, written once per interval by their own
 *    timer, flushed on close (registered by buildServices, so a test's context flushes them too);
 *  - periodic jobs: timers started by src/index.ts only (tests call the job functions directly);
 *  - the outbound webhook delivery worker: woken in process, polled by one of the periodic jobs.
 * Shutdown (ctx.close(), closers in reverse order of registration): the worker and the jobs stop
 * first, then the buffers flush, then the database and Redis close.
 */

/** Every write-behind buffer: `stop()` writes what is pending and ends its timer. */
export function writeBehindBuffers(services: Services): Array<{ stop(): Promise<void> }> {
  return [
    // One delivery-log row per (source, status, reason) and second for floods of 429s.
    services.inbound.rejections,
    // webhook_sources.last_request_at, every 5 s in one statement.
    services.inbound.lastRequests,
  ]
  // Not listed: the delivery worker's result buffer (attempts recorded together within a turn of
  // the event loop) is awaited by the worker's own stop().
}

/** Every periodic job of a replica. */
export function periodicJobs(ctx: AppContext, services: Services): PeriodicJob[] {
  return [
    // Health roll-up (every minute), delivery-log retention (every hour).
    ...deliveryLogJobs(ctx),
    // Delivery poll (every second), source.status_changed and pat.expiring events, message retention.
    ...webhookJobs(ctx, services),
    {
      name: 'planner statistics',
      firstDelayMs: STATISTICS_CHECK_INTERVAL_MS,
      intervalMs: STATISTICS_CHECK_INTERVAL_MS,
      run: () => refreshPlannerStatistics(ctx),
    },
  ]
}

export function registerWriteBehindBuffers(ctx: AppContext, services: Services): void {
  ctx.onClose(async () => {
    await Promise.allSettled(writeBehindBuffers(services).map((buffer) => buffer.stop()))
  })
}

/**
 * src/index.ts, once the app is ready to listen: the delivery worker and the periodic jobs, on the
 * app's own services. Stopped by ctx.close(): timers cleared, runs in progress awaited, the
 * worker's in-flight attempts finished or handed back within SHUTDOWN_TIMEOUT_MS.
 */
export function startBackgroundWork(ctx: AppContext, services: Services): void {
  void services.deliveryWorker.start()
  // Diagnostics only (bench/stall-timeline.ts): a timer every 5 ms is work a replica need not do.
  const probe = ctx.config.diagnoseStalls ? new EventLoopProbe(ctx.logger).start() : undefined
  const stopJobs = startPeriodicJobs(ctx, periodicJobs(ctx, services), probe)
  ctx.onClose(async () => {
    probe?.stop()
    await stopJobs()
    await services.deliveryWorker.stop(ctx.config.shutdownTimeoutMs)
  })
}
