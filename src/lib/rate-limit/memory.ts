import {
  type BucketState,
  EXACT_LOG_MAX_LIMIT,
  pickDecisive,
  type RateLimiter,
  type RateLimitResult,
  type RateLimitRule,
} from './types'
import { rolledCounts, type WindowCounts, weightedCount } from './window-counter'

/** Request times of one bucket, oldest first; `head` skips expired entries without shifting. */
interface Log {
  times: number[]
  head: number
}

interface Counter extends WindowCounts {
  windowMs: number
}

/**
 * In-process limiter with the same semantics as the Redis one. Used on its own when no REDIS_URL
 * is configured, and as the fail-open fallback when Redis is unreachable.
 */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = 'memory' as const
  private readonly logs = new Map<string, Log>()
  private readonly counters = new Map<string, Counter>()
  private lastSweep = 0

  async check(rules: RateLimitRule[], now: number): Promise<RateLimitResult> {
    return this.checkSync(rules, now)
  }

  checkSync(rules: RateLimitRule[], now: number): RateLimitResult {
    this.sweep(now)
    const counts: number[] = []
    const resets: number[] = []
    let allowed = true
    for (const rule of rules) {
      const id = `${rule.bucket}:${rule.key}`
      if (rule.limit <= EXACT_LOG_MAX_LIMIT) {
        const log = this.trimmedLog(id, rule.windowMs, now)
        const count = log.times.length - log.head
        counts.push(count)
        resets.push(count > 0 ? log.times[log.head]! + rule.windowMs - now : 0)
      } else {
        const counter = this.rolledCounter(id, rule.windowMs, now)
        counts.push(weightedCount(rule.windowMs, now, counter))
        resets.push(rule.windowMs - (now - counter.slot * rule.windowMs))
      }
      if (counts[counts.length - 1]! >= rule.limit) allowed = false
    }
    if (allowed) {
      rules.forEach((rule, index) => {
        const id = `${rule.bucket}:${rule.key}`
        if (rule.limit <= EXACT_LOG_MAX_LIMIT) {
          const log = this.logs.get(id)!
          log.times.push(now)
          if (resets[index] === 0) resets[index] = rule.windowMs
        } else {
          this.counters.get(id)!.current++
        }
        counts[index] = counts[index]! + 1
      })
    }
    const buckets: BucketState[] = rules.map((rule, index) => ({
      bucket: rule.bucket,
      limit: rule.limit,
      remaining: Math.max(0, rule.limit - counts[index]!),
      resetMs: Math.max(0, resets[index]!),
      allowed: allowed || counts[index]! < rule.limit,
      fixedRetryAfterSeconds: rule.fixedRetryAfterSeconds,
    }))
    return { allowed, decisive: pickDecisive(buckets), buckets }
  }

  state(): 'up' {
    return 'up'
  }

  async close(): Promise<void> {
    this.logs.clear()
    this.counters.clear()
  }

  private trimmedLog(id: string, windowMs: number, now: number): Log {
    let log = this.logs.get(id)
    if (!log) {
      log = { times: [], head: 0 }
      this.logs.set(id, log)
    }
    const cutoff = now - windowMs
    while (log.head < log.times.length && log.times[log.head]! <= cutoff) log.head++
    if (log.head > 64 && log.head * 2 > log.times.length) {
      log.times = log.times.slice(log.head)
      log.head = 0
    }
    return log
  }

  private rolledCounter(id: string, windowMs: number, now: number): Counter {
    const slot = Math.floor(now / windowMs)
    let counter = this.counters.get(id)
    if (!counter) {
      counter = { windowMs, slot, current: 0, previous: 0 }
      this.counters.set(id, counter)
    }
    return Object.assign(counter, rolledCounts(counter, slot))
  }

  // Buckets of keys that stopped sending would otherwise stay in memory for ever.
  private sweep(now: number): void {
    if (now - this.lastSweep < 60_000) return
    this.lastSweep = now
    for (const [id, log] of this.logs) {
      const newest = log.times[log.times.length - 1]
      if (newest === undefined || now - newest > 3_600_000) this.logs.delete(id)
    }
    for (const [id, counter] of this.counters) {
      if (now - counter.slot * counter.windowMs > 2 * counter.windowMs) this.counters.delete(id)
    }
  }
}
