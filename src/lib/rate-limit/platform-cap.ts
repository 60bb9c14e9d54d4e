import type { Logger } from '../logger'
import type { RedisConnection } from './redis-connection'
import type { BucketState, RateLimitRule } from './types'
import { rolledCounts, type WindowCounts, weightedCount } from './window-counter'

/**
 * The platform-wide cap on the inbound route (DESIGN §5), decided without a round trip: the
 * per-key limit moved into the group commit (docs/architecture.md "One round trip"), and a Redis
 * call per request for this cap alone would keep the wait it was moved to save. The cap protects
 * the service; it is not an exact guarantee like the per-key limit.
 */
export interface PlatformCap {
  /** The cap's bucket for a request at `now`; an allowed request is counted. Never waits. */
  take(now: number): BucketState
  /** The bucket as `take` would find it, counting nothing (a request refused by another limit). */
  peek(now: number): BucketState
  close(): Promise<void>
}

function bucketOf(
  rule: RateLimitRule,
  now: number,
  slot: number,
  counted: number,
  allowed: boolean,
): BucketState {
  return {
    bucket: rule.bucket,
    limit: rule.limit,
    remaining: Math.max(0, rule.limit - counted),
    resetMs: rule.windowMs - (now - slot * rule.windowMs),
    allowed,
  }
}

/** Without Redis: the replica's own count, exact for the replica (as the in-process limiter was). */
export class LocalPlatformCap implements PlatformCap {
  private counts: WindowCounts = { slot: 0, current: 0, previous: 0 }

  constructor(private readonly rule: RateLimitRule) {}

  take(now: number): BucketState {
    const bucket = this.peek(now)
    if (bucket.allowed) this.counts.current++
    return bucket
  }

  peek(now: number): BucketState {
    const slot = Math.floor(now / this.rule.windowMs)
    this.counts = rolledCounts(this.counts, slot)
    const count = weightedCount(this.rule.windowMs, now, this.counts)
    const allowed = count < this.rule.limit
    return bucketOf(this.rule, now, slot, allowed ? count + 1 : count, allowed)
  }

  async close(): Promise<void> {}
}

/**
 * Adds this replica's counts to the window counters every replica shares in Redis (the keys the
 * limiter's script keeps for the `platform` bucket, so management requests count in the same
 * total) and reads the total back, once per FLUSH_INTERVAL_MS, never on a request's path. A request
 * is refused once the last total read plus what this replica counted since is over the cap. So the
 * cap holds within what the other replicas admit in one interval plus a round trip (at 5,000
 * requests/s per replica and 50 ms, ~250 requests per replica, against a cap of 600,000 a minute).
 * While Redis does not answer, the replica adds its own counts to the last total it read: it
 * limits on its own, as the limiter does when it fails open.
 */
export const FLUSH_INTERVAL_MS = 50

const ADD_AND_READ_SCRIPT = `
local added = tonumber(ARGV[1])
if added > 0 then
  redis.call('INCRBY', KEYS[1], added)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return { tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '0') }
`

export class SharedPlatformCap implements PlatformCap {
  /** The shared totals as last read, plus this replica's counts not yet added to them. */
  private counts: WindowCounts = { slot: 0, current: 0, previous: 0 }
  /** Counts per window slot not yet sent (and, while a call is out, sent but not yet read back). */
  private readonly unsent = new Map<number, number>()
  private readonly sending = new Map<number, number>()
  private timer: ReturnType<typeof setTimeout> | undefined
  private closed = false
  private readonly command: ReturnType<RedisConnection['script']>

  constructor(
    redis: RedisConnection,
    private readonly rule: RateLimitRule,
    private readonly logger: Logger,
    private readonly keyPrefix = 'rl:',
  ) {
    this.command = redis.script(ADD_AND_READ_SCRIPT)
  }

  take(now: number): BucketState {
    const bucket = this.peek(now)
    if (bucket.allowed) {
      const slot = Math.floor(now / this.rule.windowMs)
      this.unsent.set(slot, (this.unsent.get(slot) ?? 0) + 1)
      this.schedule()
    }
    return bucket
  }

  peek(now: number): BucketState {
    const slot = Math.floor(now / this.rule.windowMs)
    this.counts = rolledCounts(this.counts, slot)
    const count = weightedCount(this.rule.windowMs, now, {
      slot,
      current: this.counts.current + this.pending(slot),
      previous: this.counts.previous + this.pending(slot - 1),
    })
    const allowed = count < this.rule.limit
    return bucketOf(this.rule, now, slot, allowed ? count + 1 : count, allowed)
  }

  private pending(slot: number): number {
    return (this.unsent.get(slot) ?? 0) + (this.sending.get(slot) ?? 0)
  }

  private schedule(): void {
    if (this.timer || this.closed) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.flush()
    }, FLUSH_INTERVAL_MS)
    this.timer.unref?.()
  }

  /** One call per slot with counts (one, except at a window's turn). */
  private async flush(): Promise<void> {
    if (this.sending.size > 0) {
      // The previous call has not answered: its counts stay pending, these wait for the next turn.
      this.schedule()
      return
    }
    for (const [slot, added] of this.unsent) this.sending.set(slot, added)
    this.unsent.clear()
    const base = `${this.keyPrefix}${this.rule.bucket}:${this.rule.key}:`
    await Promise.all(
      [...this.sending].map(async ([slot, added]) => {
        try {
          const [current, previous] = await this.command(
            [`${base}${slot}`, `${base}${slot - 1}`],
            [added, this.rule.windowMs * 2],
          )
          if (slot === this.counts.slot) {
            this.counts = { slot, current: Number(current), previous: Number(previous) }
          } else if (slot === this.counts.slot - 1) {
            this.counts = { ...this.counts, previous: Number(current) }
          }
        } catch (error) {
          // Kept as this replica's own count and sent again with the next counts.
          this.unsent.set(slot, (this.unsent.get(slot) ?? 0) + added)
          this.logger.debug('platform cap: counts not added to Redis; kept locally', {
            error: error instanceof Error ? error.message : String(error),
          })
        }
      }),
    )
    this.sending.clear()
    // Counts of slots no longer inside the sliding window are of no use to anyone.
    const oldest = this.counts.slot - 1
    for (const slot of this.unsent.keys()) if (slot < oldest) this.unsent.delete(slot)
    if (this.unsent.size > 0) this.schedule()
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
  }
}
