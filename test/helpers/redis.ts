import { afterAll } from 'bun:test'
import { openRedisConnection, type RedisConnection } from '../../src/lib/rate-limit'

/** Both Redis clients (REDIS_DRIVER) run every Redis test: same script, same breaker. */
export const REDIS_DRIVERS = ['ioredis', 'bun'] as const
export type RedisDriver = (typeof REDIS_DRIVERS)[number]

/**
 * A test file's way to open Redis connections: every one it opened is closed after the file's
 * tests. Call it once at the file's top level, where `afterAll` belongs to the file.
 */
export function redisConnectionsOfFile(): (url: string, driver: RedisDriver) => RedisConnection {
  const opened: RedisConnection[] = []
  afterAll(() => {
    for (const connection of opened) connection.close()
  })
  return (url, driver) => {
    const connection = openRedisConnection(url, driver)
    opened.push(connection)
    return connection
  }
}
