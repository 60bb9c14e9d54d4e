import { createApp } from './app'
import { type Config, ConfigError, loadConfig } from './config'
import { type AppContext, createContext } from './context'
import { runMigrations } from './db/migrate'
import { startBackgroundWork } from './jobs'
import { describeError } from './lib/errors'
import { checkSecretsKey } from './modules/webhook-endpoints/secrets-key-check'
import { buildServices } from './services'
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

let ctx: AppContext
try {
  ctx = await createContext(config)
} catch (error) {
  // No logger yet: the message alone, on stderr (a locked DATA_DIR says who holds it).
  const described = describeError(error)
  console.error(
    JSON.stringify({
      level: 'error',
      time: new Date().toISOString(),
      msg: 'start-up failed',
      error: described,
    }),
  )
  process.exit(1)
}
const { logger } = ctx
logger.info('starting', {
  database: ctx.database.location,
  rate_limiter: ctx.limiter.kind === 'redis' ? 'redis' : 'in-process (no REDIS_URL)',
})

try {
  await runMigrations(config, ctx.database, logger)
} catch (error) {
  // The SQLSTATE and message of the cause ("53300 too many connections"), not Drizzle's wrapper.
  logger.error('migrations failed: start-up stopped', { error: describeError(error) })
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
  logger.error('tracker.js build failed: start-up stopped', { error: describeError(error) })
  await ctx.close()
  process.exit(1)
}

if (!config.webhookSecretsKey) {
  // Made (or read) now, so an unwritable DATA_DIR stops start-up rather than the first endpoint.
  try {
    void ctx.secretBox
  } catch (error) {
    logger.error('webhook secrets key unusable: start-up stopped', { error: describeError(error) })
    await ctx.close()
    process.exit(1)
  }
  if (config.databaseUrl) {
    logger.warn(
      'WEBHOOK_SECRETS_KEY is not set: webhook secrets are encrypted with a key kept in DATA_DIR; replicas sharing this database must share that key (set WEBHOOK_SECRETS_KEY)',
    )
  }
}
// Whether this replica's key opens the signing secrets already stored (an error line if not; the
// replica serves either way).
try {
  await checkSecretsKey(ctx)
} catch (error) {
  logger.warn('webhook secrets: the start-up check of the key could not run', { error: describeError(error) })
}

// One set of services for the app and the background work (src/jobs.ts: the delivery worker, the
// periodic jobs, the write-behind buffers), all stopped and flushed by ctx.close() on shutdown.
const services = buildServices(ctx)
startBackgroundWork(ctx, services)

const app = createApp(ctx, { services, tracker }).listen({
  port: config.port,
  hostname: config.host,
  reusePort: config.reusePort,
  // Body limits are the app's (createApp lifts Bun's cap, whose 413 is bare): 1 MiB for every
  // route, 100 KB on the inbound route, both answered as JSON errors.
})

logger.info('ready', {
  url: `http://${config.host}:${app.server?.port}`,
  public_base_url: config.publicBaseUrl,
  startup_ms: Math.round(performance.now() - startedAt),
})

/**
 * SIGTERM/SIGINT, the pre-stop pattern of Kubernetes and of load-balancer deregistration delays:
 * /readyz answers 503 at once while everything else is still served for SHUTDOWN_DELAY_MS, so a
 * balancer that checks every `inter` and needs `fall` failures takes the replica out before its
 * port closes (set the delay above inter × fall). Then the listener stops taking connections,
 * in-flight requests finish (bounded by SHUTDOWN_TIMEOUT_MS), pools close, exit 0.
 * A second signal skips the rest of the delay.
 */
let skipDelay: (() => void) | undefined
async function shutdown(signal: string) {
  if (ctx.lifecycle.draining) {
    skipDelay?.()
    return
  }
  ctx.lifecycle.draining = true
  logger.info('shutdown: readiness 503, still serving', { signal, delay_ms: config.shutdownDelayMs })
  if (config.shutdownDelayMs > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, config.shutdownDelayMs)
      skipDelay = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
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
