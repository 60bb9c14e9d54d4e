import type Redis from 'ioredis'
import type { Config } from './config'
import {
  type Database,
  type DatabaseHandle,
  openDatabase,
  READ_ONLY_RECONNECT_INTERVAL_MS,
} from './db/client'
import { type Clock, systemClock } from './lib/clock'
import { bufferedStdoutSink, createLogger, type Logger } from './lib/logger'
import {
  LocalPlatformCap,
  MemoryRateLimiter,
  openRedisConnection,
  type PlatformCap,
  platformRule,
  type RateLimiter,
  RedisRateLimiter,
  SharedPlatformCap,
} from './lib/rate-limit'
import { openSecretBox, type SecretBox } from './lib/secrets'

/**
 * Everything with a lifetime longer than a request, built once at start-up and passed down.
 * Tests build their own (a fake clock, a memory logger, their own limiter).
 */
export interface AppContext {
  config: Config
  database: DatabaseHandle
  db: Database
  /** The limiter's ioredis client (tests inspect Redis through it); null without Redis or with REDIS_DRIVER=bun. */
  redis: Redis | null
  limiter: RateLimiter
  /**
   * The platform-wide cap of the inbound route, decided without a round trip (platform-cap.ts):
   * shared through Redis when the limiter is, the replica's own count otherwise.
   */
  platformCap: PlatformCap
  logger: Logger
  clock: Clock
  /** Encrypts the secrets the service must read back (webhook signing secrets). */
  secretBox: SecretBox
  lifecycle: Lifecycle
  /** Resources to release on shutdown, in reverse order of creation. */
  onClose(task: () => Promise<void> | void): void
  close(): Promise<void>
}

export interface Lifecycle {
  /** Set on SIGTERM: /readyz answers 503 from then on. */
  draining: boolean
  /**
   * performance.now() of the last request refused because the database could not serve (no
   * connection to be had: 53300, 57P0x, 08xxx); -Infinity when none. /readyz stays 503 for a
   * while after it, so the balancer sends traffic elsewhere until connections can be had again.
   */
  databaseUnavailableAt: number
}

export interface ContextOverrides {
  clock?: Clock
  logger?: Logger
  database?: DatabaseHandle
  limiter?: RateLimiter
  /** Use an in-memory PGlite instead of DATA_DIR when no DATABASE_URL is set. */
  inMemoryDatabase?: boolean
  /** Prefix of the Redis rate-limit keys instead of REDIS_KEY_PREFIX (tests isolate themselves with their own). */
  rateLimitKeyPrefix?: string
}

export { createRedis } from './lib/rate-limit'

export async function createContext(config: Config, overrides: ContextOverrides = {}): Promise<AppContext> {
  // Batched: one write per event-loop turn, not one per request line (flushed on exit).
  const logger = overrides.logger ?? createLogger(config.logLevel, bufferedStdoutSink())
  const clock = overrides.clock ?? systemClock
  // Opened on first use: a CLI run or a replica that never touches a webhook secret makes no key file.
  let secretBox: SecretBox | undefined
  const closers: Array<() => Promise<void> | void> = []
  const database =
    overrides.database ?? (await openDatabase(config, { inMemory: overrides.inMemoryDatabase }))
  if (!overrides.database) closers.push(() => database.close())
  database.onPoolRenewed((renewal) => {
    if (renewal.part === 'statements' && renewal.session)
      logger.error('database: a connection of its own lost its server; replaced', {
        application_name: renewal.session,
        unanswered_after_ms: renewal.unansweredAfterMs,
      })
    else if (renewal.part === 'read-only')
      logger.error('database: the server takes no writes; connecting again', {
        next_at_most_in_ms: READ_ONLY_RECONNECT_INTERVAL_MS,
      })
    else if (renewal.part === 'statements')
      logger.error('database: the shared pool lost its server; replaced', {
        unanswered_after_ms: renewal.unansweredAfterMs,
        unanswered_statements: renewal.unansweredStatements,
        lost_connections: renewal.lostConnections,
      })
    else
      logger.error('database: the listening connection lost its server; listening again', {
        not_heard_within_ms: renewal.notHeardWithinMs,
      })
  })

  let redis: Redis | null = null
  let limiter: RateLimiter
  let platformCap: PlatformCap = new LocalPlatformCap(platformRule({ config }))
  if (overrides.limiter) limiter = overrides.limiter
  else if (config.redisUrl) {
    const connection = openRedisConnection(config.redisUrl, config.redisDriver, config.redisTlsCa)
    redis = connection.ioredis
    // Start-up waits briefly so the first requests use the shared limiter, but never fails on Redis.
    await connection.waitReady(1000)
    const keyPrefix = overrides.rateLimitKeyPrefix ?? config.redisKeyPrefix
    limiter = new RedisRateLimiter(connection, new MemoryRateLimiter(), logger, keyPrefix)
    platformCap = new SharedPlatformCap(connection, platformRule({ config }), logger, keyPrefix)
    closers.push(() => connection.close())
  } else limiter = new MemoryRateLimiter()
  closers.push(() => limiter.close())
  closers.push(() => platformCap.close())

  const context: AppContext = {
    config,
    database,
    db: database.db,
    redis,
    limiter,
    platformCap,
    logger,
    clock,
    get secretBox() {
      secretBox ??= openSecretBox(config).box
      return secretBox
    },
    lifecycle: { draining: false, databaseUnavailableAt: Number.NEGATIVE_INFINITY },
    onClose(task) {
      closers.push(task)
    },
    async close() {
      for (const task of closers.reverse()) {
        try {
          await task()
        } catch (error) {
          logger.warn('error while closing a resource', { error })
        }
      }
    },
  }
  return context
}
