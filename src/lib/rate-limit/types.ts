/**
 * A sliding-window limit on one bucket. Limits up to EXACT_LOG_MAX_LIMIT per window are kept as an
 * exact log of request times (the 61st request inside any 60 s window is refused; a slot frees the
 * moment the oldest request leaves the window). Larger limits (the platform-wide cap) use a
 * sliding-window counter (previous window weighted by overlap + current window), which needs two
 * integers instead of one entry per request.
 */
export interface RateLimitRule {
  /** Label of the bucket, e.g. `inbound`, `management`, `platform`. */
  bucket: string
  /** The identity the bucket counts: a source key digest, a user id, an IP, `all`. */
  key: string
  limit: number
  windowMs: number
  /** Seconds to announce in Retry-After when refused; defaults to the exact wait. */
  fixedRetryAfterSeconds?: number
}

export const EXACT_LOG_MAX_LIMIT = 10_000

export interface BucketState {
  bucket: string
  limit: number
  remaining: number
  /** Milliseconds until the window frees a slot (the oldest counted request leaves it). */
  resetMs: number
  allowed: boolean
  fixedRetryAfterSeconds?: number
}

export interface RateLimitResult {
  allowed: boolean
  /** The most constraining bucket: the refused one, else the one with the fewest remaining. */
  decisive: BucketState
  buckets: BucketState[]
}

export interface RateLimiter {
  readonly kind: 'memory' | 'redis'
  /** Checks every rule at once; a request is recorded in all buckets only when all allow it. */
  check(rules: RateLimitRule[], now: number): Promise<RateLimitResult>
  /** `up`, or `degraded` when the shared store is unreachable and the in-process fallback is used. */
  state(): 'up' | 'degraded'
  close(): Promise<void>
}

export function pickDecisive(buckets: BucketState[]): BucketState {
  let decisive = buckets[0]!
  for (const bucket of buckets) {
    if (!bucket.allowed && (decisive.allowed || bucket.resetMs > decisive.resetMs)) decisive = bucket
    else if (bucket.allowed && decisive.allowed && bucket.remaining < decisive.remaining) decisive = bucket
  }
  return decisive
}

export function retryAfterSeconds(bucket: BucketState): number {
  return bucket.fixedRetryAfterSeconds ?? Math.max(1, Math.ceil(bucket.resetMs / 1000))
}
