import type Redis from 'ioredis'
import type { Logger } from '../logger'
import type { MemoryRateLimiter } from './memory'
import {
  type BucketState,
  EXACT_LOG_MAX_LIMIT,
  pickDecisive,
  type RateLimiter,
  type RateLimitResult,
  type RateLimitRule,
} from './types'

/**
 * All buckets of a request are checked and recorded in one Lua call: one round trip, atomic across
 * replicas. Exact buckets are sorted sets of request times; large ones a pair of window counters.
 * Returns { allowed, count_1..count_n, reset_1..reset_n } (counts include this request if allowed).
 */
const SLIDING_WINDOW_SCRIPT = `
local now = tonumber(ARGV[1])
local member = ARGV[2]
local n = #KEYS
local counts, resets = {}, {}
local allowed = 1
for i = 1, n do
  local base = 2 + (i - 1) * 3
  local limit, window, exact = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), ARGV[base + 3] == '1'
  local key = KEYS[i]
  if exact then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
    counts[i] = redis.call('ZCARD', key)
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if oldest[2] then resets[i] = tonumber(oldest[2]) + window - now else resets[i] = 0 end
  else
    local slot = math.floor(now / window)
    local current = tonumber(redis.call('GET', key .. ':' .. slot) or '0')
    local previous = tonumber(redis.call('GET', key .. ':' .. (slot - 1)) or '0')
    local elapsed = now - slot * window
    counts[i] = math.floor(previous * (window - elapsed) / window) + current
    resets[i] = window - elapsed
  end
  if counts[i] >= limit then allowed = 0 end
end
if allowed == 1 then
  for i = 1, n do
    local base = 2 + (i - 1) * 3
    local window, exact = tonumber(ARGV[base + 2]), ARGV[base + 3] == '1'
    local key = KEYS[i]
    if exact then
      redis.call('ZADD', key, now, member)
      redis.call('PEXPIRE', key, window)
      if resets[i] == 0 then resets[i] = window end
    else
      local slotKey = key .. ':' .. math.floor(now / window)
      redis.call('INCR', slotKey)
      redis.call('PEXPIRE', slotKey, window * 2)
    end
    counts[i] = counts[i] + 1
  end
end
local out = { allowed }
for i = 1, n do out[#out + 1] = counts[i] end
for i = 1, n do out[#out + 1] = resets[i] end
return out
`

type SlidingWindowCommand = (...args: (string | number)[]) => Promise<number[]>

export class RedisRateLimiter implements RateLimiter {
  readonly kind = 'redis' as const
  private degraded = false
  private sequence = 0
  private readonly instanceTag = Math.random().toString(36).slice(2, 10)
  private readonly command: SlidingWindowCommand

  constructor(
    private readonly redis: Redis,
    private readonly fallback: MemoryRateLimiter,
    private readonly logger: Logger,
    private readonly keyPrefix = 'rl:',
  ) {
    // defineCommand sends EVALSHA and falls back to EVAL once when the script is not cached.
    redis.defineCommand('leadCaptureSlidingWindow', { lua: SLIDING_WINDOW_SCRIPT })
    this.command = (
      redis as unknown as { leadCaptureSlidingWindow: SlidingWindowCommand }
    ).leadCaptureSlidingWindow.bind(redis)
    redis.on('ready', () => {
      if (this.degraded) logger.info('redis reachable again: shared rate limits resumed')
      this.degraded = false
    })
  }

  async check(rules: RateLimitRule[], now: number): Promise<RateLimitResult> {
    const args: (string | number)[] = [rules.length]
    for (const rule of rules) args.push(`${this.keyPrefix}${rule.bucket}:${rule.key}`)
    args.push(now, `${now}:${this.instanceTag}:${this.sequence++}`)
    for (const rule of rules) args.push(rule.limit, rule.windowMs, rule.limit <= EXACT_LOG_MAX_LIMIT ? 1 : 0)
    let reply: number[]
    try {
      reply = await this.command(...args)
    } catch (error) {
      // Fail open: a Redis outage must never refuse or hang traffic. Limits keep working per replica.
      if (!this.degraded) {
        this.degraded = true
        this.logger.warn('redis unreachable: rate limits fall back to the in-process limiter', { error })
      }
      return this.fallback.check(rules, now)
    }
    if (this.degraded && this.redis.status === 'ready') this.degraded = false
    const allowed = reply[0] === 1
    const buckets: BucketState[] = rules.map((rule, index) => {
      const count = Number(reply[1 + index])
      return {
        bucket: rule.bucket,
        limit: rule.limit,
        remaining: Math.max(0, rule.limit - count),
        resetMs: Math.max(0, Number(reply[1 + rules.length + index])),
        allowed: allowed || count < rule.limit,
        fixedRetryAfterSeconds: rule.fixedRetryAfterSeconds,
      }
    })
    return { allowed, decisive: pickDecisive(buckets), buckets }
  }

  state(): 'up' | 'degraded' {
    return this.degraded || this.redis.status !== 'ready' ? 'degraded' : 'up'
  }

  async close(): Promise<void> {
    await this.fallback.close()
  }
}
