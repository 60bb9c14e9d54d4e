import type { Logger } from '../logger'
import type { MemoryRateLimiter } from './memory'
import type { RedisConnection } from './redis-connection'
import {
  type BucketState,
  EXACT_LOG_MAX_LIMIT,
  pickDecisive,
  type RateLimiter,
  type RateLimitResult,
  type RateLimitRule,
} from './types'

/**
 * All buckets of a request are checked and recorded in one Lua call, atomic across replicas.
 * Exact buckets are sorted sets of request times; large ones a pair of window counters. Checks made
 * in the same event-loop turn travel together: the script takes several requests and evaluates
 * them one after another, exactly as separate calls in that order would.
 * ARGV: request count, then per request: now, member, rule count, then per rule: limit, window, exact.
 * KEYS: every rule's key, in the same order. Returns per request: allowed, counts…, resets….
 */
const SLIDING_WINDOW_SCRIPT = `
local out = {}
local a = 2
local k = 1
-- Window counters read once per call and kept here: every request of a batch shares the platform
-- bucket, so reading and writing it per request would be most of the script's work. Increments are
-- written once at the end (INCRBY), with the same result as one INCR per allowed request.
local slots, added, slotWindows = {}, {}, {}
local function slotCount(slotKey)
  local value = slots[slotKey]
  if value == nil then
    value = tonumber(redis.call('GET', slotKey) or '0')
    slots[slotKey] = value
  end
  return value
end
for r = 1, tonumber(ARGV[1]) do
  local now, member, n = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  a = a + 3
  local counts, resets, limits, windows, exacts, keys = {}, {}, {}, {}, {}, {}
  local allowed = 1
  for i = 1, n do
    limits[i], windows[i], exacts[i] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
    a = a + 3
    keys[i] = KEYS[k]
    k = k + 1
    local key, window = keys[i], windows[i]
    if exacts[i] then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
      counts[i] = redis.call('ZCARD', key)
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      if oldest[2] then resets[i] = tonumber(oldest[2]) + window - now else resets[i] = 0 end
    else
      local slot = math.floor(now / window)
      local current = slotCount(key .. ':' .. slot)
      local previous = slotCount(key .. ':' .. (slot - 1))
      local elapsed = now - slot * window
      counts[i] = math.floor(previous * (window - elapsed) / window) + current
      resets[i] = window - elapsed
    end
    if counts[i] >= limits[i] then allowed = 0 end
  end
  if allowed == 1 then
    for i = 1, n do
      if exacts[i] then
        redis.call('ZADD', keys[i], now, member)
        redis.call('PEXPIRE', keys[i], windows[i])
        if resets[i] == 0 then resets[i] = windows[i] end
      else
        local slotKey = keys[i] .. ':' .. math.floor(now / windows[i])
        slots[slotKey] = slotCount(slotKey) + 1
        added[slotKey] = (added[slotKey] or 0) + 1
        slotWindows[slotKey] = windows[i]
      end
      counts[i] = counts[i] + 1
    end
  end
  out[#out + 1] = allowed
  for i = 1, n do out[#out + 1] = counts[i] end
  for i = 1, n do out[#out + 1] = resets[i] end
end
for slotKey, count in pairs(added) do
  redis.call('INCRBY', slotKey, count)
  redis.call('PEXPIRE', slotKey, slotWindows[slotKey] * 2)
end
return out
`

const MAX_BATCH = 500

/**
 * Circuit breaker. A Redis that hangs (SIGSTOP, a stuck host) keeps the TCP connection open, so
 * every command would wait for ioredis' 250 ms command timeout (Bun's RedisClient has none). Instead: a script call that has not
 * answered within the trip threshold answers its batch from the in-process limiter and opens the
 * circuit; while open, every check goes straight to the in-process limiter and a PING every
 * PROBE_INTERVAL_MS tests Redis in the background; the first PING answered closes the circuit
 * (shared limits resume within one probe interval plus a round trip of recovery).
 *
 * The threshold follows the link: TRIP_FACTOR times the slowest recent answer, between
 * MIN_TRIP_MS and MAX_TRIP_MS. A quiet loopback or LAN Redis answers in 1–2 ms, so a hang trips
 * after MIN_TRIP_MS and only the few requests of those first milliseconds wait. On a loaded host a
 * healthy Redis answers in tens of milliseconds now and then (~75 ms seen on a busy 2-core CI box),
 * which raises the threshold to MAX_TRIP_MS, so slowness alone does not give up the exact shared
 * limit. A new limiter starts at MAX_TRIP_MS until it has seen answers.
 */
export const MIN_TRIP_MS = 40
export const MAX_TRIP_MS = 200
const TRIP_FACTOR = 4
/** Per answered batch the remembered slowest answer shrinks by this factor (half-life ~35 batches). */
const SLOWEST_ANSWER_DECAY = 0.98

/** The trip threshold for a link whose slowest recent answer took `slowestAnswerMs`. */
export function tripThresholdMs(slowestAnswerMs: number): number {
  return Math.min(MAX_TRIP_MS, Math.max(MIN_TRIP_MS, slowestAnswerMs * TRIP_FACTOR))
}

export const PROBE_INTERVAL_MS = 500

interface PendingCheck {
  rules: RateLimitRule[]
  now: number
  resolve(result: RateLimitResult): void
}

export class RedisRateLimiter implements RateLimiter {
  readonly kind = 'redis' as const
  /** The circuit is open: checks go to the in-process limiter without touching Redis. */
  private degraded = false
  private probeTimer: ReturnType<typeof setTimeout> | undefined
  private closed = false
  private sequence = 0
  private readonly instanceTag = Math.random().toString(36).slice(2, 10)
  private readonly command: ReturnType<RedisConnection['script']>
  /** The slowest recent answer, decaying per batch; starts where the threshold is MAX_TRIP_MS. */
  private slowestAnswerMs = MAX_TRIP_MS / TRIP_FACTOR

  constructor(
    private readonly redis: RedisConnection,
    private readonly fallback: MemoryRateLimiter,
    private readonly logger: Logger,
    private readonly keyPrefix = 'rl:',
  ) {
    this.command = redis.script(SLIDING_WINDOW_SCRIPT)
    // A dropped connection opens the circuit at once; the probe closes it when Redis answers.
    redis.onClose((error) => this.open(error))
  }

  private pending: PendingCheck[] = []
  private flushScheduled = false

  check(rules: RateLimitRule[], now: number): Promise<RateLimitResult> {
    if (this.degraded) return Promise.resolve(this.fallback.checkSync(rules, now))
    return new Promise((resolve) => {
      this.pending.push({ rules, now, resolve })
      if (this.flushScheduled) return
      this.flushScheduled = true
      setImmediate(() => void this.flush())
    })
  }

  /** One script call for every check queued in this turn: one write, one reply to parse. */
  private async flush(): Promise<void> {
    this.flushScheduled = false
    // Bounded so one script call never holds Redis for long; the rest goes in the next call.
    const batch = this.pending.splice(0, MAX_BATCH)
    if (this.pending.length > 0) {
      this.flushScheduled = true
      setImmediate(() => void this.flush())
    }
    if (batch.length === 0) return
    if (this.degraded) {
      for (const { rules, now, resolve } of batch) resolve(this.fallback.checkSync(rules, now))
      return
    }
    const keys: string[] = []
    const args: (string | number)[] = [batch.length]
    for (const { rules, now } of batch) {
      args.push(now, `${now}:${this.instanceTag}:${this.sequence++}`, rules.length)
      for (const rule of rules) {
        keys.push(`${this.keyPrefix}${rule.bucket}:${rule.key}`)
        args.push(rule.limit, rule.windowMs, rule.limit <= EXACT_LOG_MAX_LIMIT ? 1 : 0)
      }
    }
    let settled = false
    const answerFromFallback = (error: unknown) => {
      if (settled) return
      settled = true
      // Fail open: a Redis outage must never refuse or hang traffic. Limits keep working per replica.
      this.open(error)
      for (const { rules, now, resolve } of batch) resolve(this.fallback.checkSync(rules, now))
    }
    // The decision waits one more turn: after an event-loop stall of our own the timer and the
    // reply are both due, and the reply (I/O) is read before setImmediate callbacks run, so only a
    // Redis that really did not answer trips the circuit.
    const tripAfterMs = tripThresholdMs(this.slowestAnswerMs)
    const trip = setTimeout(
      () =>
        setImmediate(() => answerFromFallback(new Error(`no answer within ${Math.round(tripAfterMs)} ms`))),
      tripAfterMs,
    )
    const sentAt = performance.now()
    let reply: number[]
    try {
      reply = await this.command(keys, args)
    } catch (error) {
      clearTimeout(trip)
      answerFromFallback(error)
      return
    }
    clearTimeout(trip)
    // A late answer: the batch was already answered by the fallback (Redis counted it all the same).
    // It is not a sample of the link either: it measures the stall, not Redis.
    if (settled) return
    settled = true
    this.slowestAnswerMs = Math.max(performance.now() - sentAt, this.slowestAnswerMs * SLOWEST_ANSWER_DECAY)
    let offset = 0
    for (const { rules, resolve } of batch) {
      const allowed = reply[offset] === 1
      const buckets: BucketState[] = rules.map((rule, index) => {
        const count = Number(reply[offset + 1 + index])
        return {
          bucket: rule.bucket,
          limit: rule.limit,
          remaining: Math.max(0, rule.limit - count),
          resetMs: Math.max(0, Number(reply[offset + 1 + rules.length + index])),
          allowed: allowed || count < rule.limit,
          fixedRetryAfterSeconds: rule.fixedRetryAfterSeconds,
        }
      })
      offset += 1 + 2 * rules.length
      resolve({ allowed, decisive: pickDecisive(buckets), buckets })
    }
  }

  /** Opens the circuit (once) and starts the background probe. */
  private open(error: unknown): void {
    if (this.degraded || this.closed) return
    this.degraded = true
    this.logger.warn('redis unreachable or slow: rate limits fall back to the in-process limiter', {
      // with its code: `DEPTH_ZERO_SELF_SIGNED_CERT: self signed certificate` says what to fix
      error: describeRedisError(error),
    })
    this.scheduleProbe()
  }

  private scheduleProbe(): void {
    if (this.closed) return
    this.probeTimer = setTimeout(() => void this.probe(), PROBE_INTERVAL_MS)
    this.probeTimer.unref?.()
  }

  private async probe(): Promise<void> {
    if (this.closed || !this.degraded) return
    let answered = false
    if (this.redis.ready) {
      answered = await Promise.race([
        this.redis.ping().then(
          () => true,
          () => false,
        ),
        Bun.sleep(PROBE_INTERVAL_MS).then(() => false),
      ])
    }
    if (this.closed) return
    if (answered) {
      this.degraded = false
      this.logger.info('redis reachable again: shared rate limits resumed')
      return
    }
    this.scheduleProbe()
  }

  state(): 'up' | 'degraded' {
    return this.degraded || !this.redis.ready ? 'degraded' : 'up'
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.probeTimer)
    await this.fallback.close()
  }
}

/** A Redis client's error for the log: its code (when it has one) and message. */
function describeRedisError(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const code = (error as Error & { code?: unknown }).code
  return typeof code === 'string' ? `${code}: ${error.message}` : error.message
}
