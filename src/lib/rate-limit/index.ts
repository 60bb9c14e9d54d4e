export { MemoryRateLimiter } from './memory'
export { RedisRateLimiter } from './redis'
export * from './types'
