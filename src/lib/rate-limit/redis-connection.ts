import Redis from 'ioredis'
import { openBunRedis } from './bun-redis'

/**
 * What the Redis limiter needs of a client: run its script, PING, say whether the connection is up
 * and tell when it drops. Two clients provide it (REDIS_DRIVER): ioredis and Bun's built-in
 * RedisClient; the limiter, its script and its circuit breaker (redis.ts) are the same for both.
 */
export interface RedisConnection {
  readonly driver: 'ioredis' | 'bun'
  /** A function running `lua` by EVALSHA, sending the script (EVAL) once when Redis lacks it. */
  script(lua: string): (keys: string[], args: (string | number)[]) => Promise<number[]>
  ping(): Promise<unknown>
  /** Connected and able to take commands now. */
  readonly ready: boolean
  /** Runs on every drop of the connection (the limiter opens its circuit at once). */
  onClose(listener: (error: Error) => void): void
  /** Resolves when connected, or after `timeoutMs` whatever the state (start-up never fails on Redis). */
  waitReady(timeoutMs: number): Promise<void>
  close(): void
  /** The ioredis client, for the tests that inspect Redis memory; null with Bun's client. */
  readonly ioredis: Redis | null
}

/**
 * ioredis tuned to fail fast: a Redis outage must never hang a request (DESIGN §1). `tlsCa`:
 * REDIS_TLS_CA_FILE's authority for a rediss:// URL (verified as any TLS peer: chain and name).
 */
export function createRedis(url: string, tlsCa?: string): Redis {
  return new Redis(url, {
    ...(tlsCa ? { tls: { ca: tlsCa } } : {}),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 250,
    connectTimeout: 1000,
    lazyConnect: false,
    retryStrategy: reconnectDelayMs,
    reconnectOnError: () => false,
  })
}

/** The wait before the n-th reconnection attempt, for both clients. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(attempt * 200, 2000)
}

export function openRedisConnection(url: string, driver: 'ioredis' | 'bun', tlsCa?: string): RedisConnection {
  return driver === 'bun' ? openBunRedis(url, tlsCa) : ioredisConnection(createRedis(url, tlsCa))
}

export function ioredisConnection(redis: Redis): RedisConnection {
  // Errors are reported through the limiter's state; without a listener ioredis prints each one.
  // The last one is the reason a drop is logged with (a certificate refused, a refused connection),
  // where the close itself says only that it closed.
  let lastError: Error | null = null
  redis.on('error', (error: Error) => {
    lastError = error
  })
  redis.on('ready', () => {
    lastError = null
  })
  let scripts = 0
  return {
    driver: 'ioredis',
    script(lua) {
      // defineCommand sends EVALSHA and falls back to EVAL once when the script is not cached.
      const name = `leadCaptureScript${scripts++}`
      redis.defineCommand(name, { lua })
      const command = (
        redis as unknown as Record<string, (...args: (string | number)[]) => Promise<number[]>>
      )[name]!.bind(redis)
      return (keys, args) => command(keys.length, ...keys, ...args)
    },
    ping: () => redis.ping(),
    get ready() {
      return redis.status === 'ready'
    },
    onClose(listener) {
      redis.on('close', () => listener(lastError ?? new Error('connection closed')))
    },
    async waitReady(timeoutMs) {
      if (redis.status === 'ready') return
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, timeoutMs)
        redis.once('ready', done)
        function done() {
          clearTimeout(timer)
          redis.off('ready', done)
          resolve()
        }
      })
    },
    close() {
      redis.disconnect()
    },
    ioredis: redis,
  }
}
