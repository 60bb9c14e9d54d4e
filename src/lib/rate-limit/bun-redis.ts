import { RedisClient } from 'bun'
import { type RedisConnection, reconnectDelayMs } from './redis-connection'

/**
 * REDIS_DRIVER=bun: the limiter on Bun's built-in RedisClient, made to behave as the ioredis client
 * of redis-connection.ts does:
 * - Commands sent while disconnected fail at once (enableOfflineQueue: false), as with ioredis.
 * - RedisClient has no per-command timeout (ioredis: 250 ms). The limiter's circuit breaker
 *   answers a batch Redis has not answered within its trip threshold (40–200 ms) from the
 *   in-process limiter, so a hung Redis never holds a request either way; the unanswered call only
 *   settles when the connection drops or Redis resumes.
 * - Reconnection is ours, not the client's: its autoReconnect gives up after maxRetries, and an idle
 *   timeout closes for good. Here every drop schedules connect() after reconnectDelayMs, forever,
 *   as ioredis' retryStrategy does.
 * - No defineCommand: EVALSHA by the script's SHA-1, and EVAL once when Redis answers NOSCRIPT
 *   (after a restart or SCRIPT FLUSH), which caches it again.
 * Commands sent in one event-loop turn are pipelined by the client (enableAutoPipelining).
 */
export function openBunRedis(url: string, tlsCa?: string): RedisConnection {
  const client = new RedisClient(url, {
    // REDIS_TLS_CA_FILE's authority for a rediss:// URL. Bun's client does not say why a TLS
    // handshake failed (its close is "Connection closed"); ioredis' does.
    ...(tlsCa ? { tls: { ca: tlsCa } } : {}),
    enableOfflineQueue: false,
    autoReconnect: false,
    connectionTimeout: 1000,
    enableAutoPipelining: true,
  })
  const closeListeners: Array<(error: Error) => void> = []
  const readyWaiters = new Set<() => void>()
  let closed = false
  let attempt = 0
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined

  client.onconnect = () => {
    attempt = 0
    for (const resolve of readyWaiters) resolve()
    readyWaiters.clear()
  }
  client.onclose = (error) => {
    for (const listener of closeListeners) listener(error ?? new Error('connection closed'))
    scheduleReconnect()
  }
  function scheduleReconnect() {
    if (closed || reconnectTimer) return
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined
      // A failed attempt runs onclose again, which schedules the next one.
      client.connect().catch(() => {})
    }, reconnectDelayMs(++attempt))
    reconnectTimer.unref?.()
  }
  // Connect now, as ioredis does (lazyConnect: false); a failure schedules the retries.
  client.connect().catch(() => scheduleReconnect())

  return {
    driver: 'bun',
    script(lua) {
      const sha = new Bun.CryptoHasher('sha1').update(lua).digest('hex')
      return async (keys, args) => {
        const tail = [String(keys.length), ...keys, ...args.map(String)]
        try {
          return (await client.send('EVALSHA', [sha, ...tail])) as number[]
        } catch (error) {
          if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error
          return (await client.send('EVAL', [lua, ...tail])) as number[]
        }
      }
    },
    ping: () => client.send('PING', []),
    get ready() {
      return client.connected
    },
    onClose(listener) {
      closeListeners.push(listener)
    },
    async waitReady(timeoutMs) {
      if (client.connected) return
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          readyWaiters.delete(done)
          resolve()
        }
        const timer = setTimeout(done, timeoutMs)
        readyWaiters.add(done)
      })
    },
    close() {
      closed = true
      clearTimeout(reconnectTimer)
      client.close()
    },
    ioredis: null,
  }
}
