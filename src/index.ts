import { createApp } from './app'
import { type Config, ConfigError, loadConfig } from './config'
import { createContext } from './context'
import { runMigrations } from './db/migrate'
import { refreshPlannerStatistics, STATISTICS_CHECK_INTERVAL_MS } from './db/planner-statistics'
import { startPeriodicJobs } from './lib/periodic'
import { deliveryLogJobs } from './modules/delivery-logs/jobs'
import { type BuiltTracker, buildTracker } from './tracker'

/** Start-up only: config → context → migrations → tracker build → listen → signals. */
const startedAt = performance.now()

let config: Config
try {
  config = loadConfig()
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message)
    process.exit(1)
  }
  throw error
}

const ctx = await createContext(config)
const { logger } = ctx
logger.info('starting', {
  database: ctx.database.location,
  rate_limiter: ctx.limiter.kind === 'redis' ? 'redis' : 'in-process (no REDIS_URL)',
})

try {
  await runMigrations(config, ctx.database, logger)
} catch (error) {
  logger.error('migrations failed', { error })
  await ctx.close()
  process.exit(1)
}

// Built before listening: a page must never get a broken or missing tracker.js from a replica
// that looks ready.
let tracker: BuiltTracker
try {
  tracker = await buildTracker()
  logger.info('tracker.js built', { raw_bytes: tracker.rawBytes, gzip_bytes: tracker.gzipBytes })
} catch (error) {
  logger.error('tracker.js build failed: start-up stopped', { error })
  await ctx.close()
  process.exit(1)
}

// Health roll-up, log retention and planner statistics: timers stopped by ctx.close() on shutdown.
startPeriodicJobs(ctx, [
  ...deliveryLogJobs(ctx),
  {
    name: 'planner statistics',
    firstDelayMs: STATISTICS_CHECK_INTERVAL_MS,
    intervalMs: STATISTICS_CHECK_INTERVAL_MS,
    run: () => refreshPlannerStatistics(ctx),
  },
])

const app = createApp(ctx, { tracker }).listen({
  port: config.port,
  hostname: config.host,
  // The inbound route enforces its own 100 KB limit while reading; this only caps everything else.
  maxRequestBodySize: 1024 * 1024,
})

logger.info('ready', {
  url: `http://${config.host}:${app.server?.port}`,
  public_base_url: config.publicBaseUrl,
  startup_ms: Math.round(performance.now() - startedAt),
})

/**
 * SIGTERM/SIGINT: readiness goes 503 at once, the listener stops taking connections, in-flight
 * requests finish (bounded by SHUTDOWN_TIMEOUT_MS), then pools close.
 */
async function shutdown(signal: string) {
  if (ctx.lifecycle.draining) return
  ctx.lifecycle.draining = true
  logger.info('shutdown: draining in-flight requests', { signal })
  const deadline = setTimeout(() => {
    logger.warn('shutdown: timeout reached, closing remaining connections')
    app.server?.stop(true)
  }, config.shutdownTimeoutMs)
  try {
    await app.server?.stop(false)
  } finally {
    clearTimeout(deadline)
  }
  await ctx.close()
  logger.info('shutdown: done')
  process.exit(0)
}

process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))
