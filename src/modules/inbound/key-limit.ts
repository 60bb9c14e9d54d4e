import {
  type BucketState,
  pickDecisive,
  type RateLimitDecision,
  rateLimitDecision,
  WINDOW_MS,
} from '../../lib/rate-limit'
import type { WindowVerdict } from '../delivery-logs/log-writer'

/** Spec §8: 60 requests per minute per source key, `Retry-After: 60` when exceeded. */
export const INBOUND_LIMIT_PER_MIN = 60

/**
 * The per-key limit's verdict on one request, as PostgreSQL decided it (inbound_rate_take in
 * drizzle/functions/, called by ingest_leads, log_deliveries and count_inbound_requests): whether
 * the request was counted, how many remain in the window after it, and the milliseconds until the
 * oldest counted request leaves the window.
 */
export type KeyVerdict = WindowVerdict

/** The verdict as the limiter's bucket, so the headers and the 429 are made as for any bucket. */
export function keyBucket(verdict: KeyVerdict): BucketState {
  return {
    bucket: 'inbound',
    limit: INBOUND_LIMIT_PER_MIN,
    remaining: verdict.remaining,
    resetMs: Math.max(0, verdict.resetMs),
    allowed: verdict.allowed,
    fixedRetryAfterSeconds: 60,
  }
}

/**
 * The answer for the buckets of an inbound request: the platform cap (decided by the replica) and
 * the key's (by PostgreSQL, or by the replica's pre-check), or the cap alone when the key has no
 * verdict (its source was deleted meanwhile). The headers of the most constraining bucket, as the
 * limiter's answers had.
 */
export function inboundDecision(platform: BucketState, key: KeyVerdict | null): RateLimitDecision {
  const buckets = key ? [platform, keyBucket(key)] : [platform]
  return rateLimitDecision({
    allowed: buckets.every((bucket) => bucket.allowed),
    decisive: pickDecisive(buckets),
    buckets,
  })
}

/** Entries kept before the expired ones are swept (a sweep is one pass over the map). */
const SWEEP_AT_SIZE = 10_000

/**
 * The replica's pre-check of the per-key limit: keeps a flood over the limit off the database
 * without ever refusing wrongly. When PostgreSQL reports a window with no slot left, every one of
 * its 60 counted requests is at least as recent as the oldest, so none leaves the window before
 * `oldest + 60 s` (the reset it reported): until then any request on the key is over the limit,
 * whatever the other replicas did meanwhile (they can only add requests). The replica remembers
 * that moment per source and refuses locally until it; after it, the database decides again.
 */
export class FullWindows {
  private readonly fullUntil = new Map<string, number>()

  /** A verdict of the database on a request of `sourceId` received at `receivedAt`. */
  note(sourceId: string, receivedAt: number, verdict: KeyVerdict): void {
    if (verdict.remaining > 0) {
      this.fullUntil.delete(sourceId)
      return
    }
    if (this.fullUntil.size >= SWEEP_AT_SIZE) this.sweep(receivedAt)
    this.fullUntil.set(sourceId, receivedAt + verdict.resetMs)
  }

  /** The refusing verdict for a request at `now` when the window is known to be full, else null. */
  check(sourceId: string, now: number): KeyVerdict | null {
    const until = this.fullUntil.get(sourceId)
    if (until === undefined) return null
    if (now >= until) {
      this.fullUntil.delete(sourceId)
      return null
    }
    return { allowed: false, remaining: 0, resetMs: Math.min(WINDOW_MS, until - now) }
  }

  private sweep(now: number): void {
    for (const [sourceId, until] of this.fullUntil) if (until <= now) this.fullUntil.delete(sourceId)
  }
}
