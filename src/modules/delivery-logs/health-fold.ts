import type { Outcome, SourceHealth } from './model'
import { type AggregateRow, bucketUpperBoundMs } from './repository'

export const HOUR_MS = 3_600_000

const emptyCounts = () => ({ requests: 0, created: 0, updated: 0, spam: 0, error: 0, rejected: 0 })

/** Upper bound (ms, 2 decimals) of the histogram bucket that holds the given share of the samples. */
function percentile(histogram: Map<number, number>, total: number, fraction: number): number | null {
  if (total === 0) return null
  const rank = Math.ceil(fraction * total)
  let seen = 0
  for (const bucket of [...histogram.keys()].sort((a, b) => a - b)) {
    seen += histogram.get(bucket)!
    if (seen >= rank) return Math.round(bucketUpperBoundMs(bucket) * 100) / 100
  }
  return null
}

/** The parts of the health view that the window's aggregate rows make. */
export type FoldedHealth = Pick<
  SourceHealth,
  'totals' | 'rejections' | 'success_rate' | 'latency_ms' | 'hourly'
>

/**
 * Folds the window's aggregate rows (roll-up and live rows alike; several rows may name one hour
 * and outcome) into totals by outcome, hourly buckets from `from` on, rejections by status and reason
 * (most first), the success rate and the latency percentiles. Rows outside the window are ignored.
 */
export function foldAggregates(rows: readonly AggregateRow[], from: number, hours: number): FoldedHealth {
  const totals = emptyCounts()
  const hourly = Array.from({ length: hours }, (_, index) => ({
    from: new Date(from + index * HOUR_MS).toISOString(),
    to: new Date(from + (index + 1) * HOUR_MS).toISOString(),
    ...emptyCounts(),
  }))
  const rejections = new Map<string, { reason: string; http_status: number; count: number }>()
  const histogram = new Map<number, number>()
  let samples = 0
  for (const row of rows) {
    if (row.kind === 'latency') {
      histogram.set(row.bucket!, (histogram.get(row.bucket!) ?? 0) + row.requests)
      samples += row.requests
      continue
    }
    const bucket = hourly[Math.floor((row.hour_ms! - from) / HOUR_MS)]
    const outcome: Outcome = row.outcome!
    if (!bucket || !(outcome in totals)) continue
    bucket.requests += row.requests
    bucket[outcome] += row.requests
    totals.requests += row.requests
    totals[outcome] += row.requests
    if (outcome === 'rejected') {
      const key = `${row.http_status}|${row.reason}`
      const entry = rejections.get(key) ?? {
        reason: row.reason || 'unknown',
        http_status: row.http_status!,
        count: 0,
      }
      entry.count += row.requests
      rejections.set(key, entry)
    }
  }
  const successes = totals.created + totals.updated + totals.spam
  return {
    totals,
    hourly,
    rejections: [...rejections.values()].sort(
      (a, b) => b.count - a.count || a.reason.localeCompare(b.reason),
    ),
    success_rate: successRate(successes, totals.requests),
    latency_ms: {
      p50: percentile(histogram, samples, 0.5),
      p95: percentile(histogram, samples, 0.95),
      samples,
    },
  }
}

/** The window's success rate as health shows it (4 decimals), null without requests. */
export function successRate(successes: number, requests: number): number | null {
  return requests === 0 ? null : Math.round((successes / requests) * 10_000) / 10_000
}
