export { MemoryRateLimiter } from './memory'
export { MAX_TRIP_MS, MIN_TRIP_MS, RedisRateLimiter, tripThresholdMs } from './redis'
export { createRedis, ioredisConnection, openRedisConnection, type RedisConnection } from './redis-connection'
export * from './types'
