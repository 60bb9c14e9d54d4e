export * from './decision'
export { MemoryRateLimiter } from './memory'
export { MAX_TRIP_MS, MIN_TRIP_MS, RedisRateLimiter, tripThresholdMs } from './redis'
export * from './types'
