/**
 * A sliding-window counter (the limiter's counters above EXACT_LOG_MAX_LIMIT, the platform cap):
 * the fixed window `slot` counts `current`, and the one before it `previous`, weighted by how much
 * of it the sliding window still covers. Also what the Redis script computes (redis.ts).
 */
export interface WindowCounts {
  slot: number
  current: number
  previous: number
}

/** The counts as of `slot`: unchanged within it; the current count becomes the previous one next. */
export function rolledCounts(counts: WindowCounts, slot: number): WindowCounts {
  if (counts.slot === slot) return counts
  return { slot, current: 0, previous: counts.slot === slot - 1 ? counts.current : 0 }
}

/** Requests in the sliding window ending at `now`. */
export function weightedCount(windowMs: number, now: number, counts: WindowCounts): number {
  const elapsed = now - counts.slot * windowMs
  return Math.floor((counts.previous * (windowMs - elapsed)) / windowMs) + counts.current
}
