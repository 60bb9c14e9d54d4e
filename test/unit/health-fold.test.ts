import { describe, expect, test } from 'bun:test'
import { foldAggregates, HOUR_MS } from '../../src/modules/delivery-logs/health-fold'
import { OUTCOMES, type Outcome } from '../../src/modules/delivery-logs/model'
import type { AggregateRow } from '../../src/modules/delivery-logs/repository'

const FROM = Date.UTC(2026, 5, 1, 0, 0, 0)
const HOURS = 24

function count(hour: number, outcome: Outcome, requests: number, status = 200, reason: string | null = null) {
  return {
    kind: 'count',
    hour_ms: FROM + hour * HOUR_MS,
    outcome,
    http_status: status,
    reason,
    bucket: null,
    requests,
  } satisfies AggregateRow
}

function latency(bucket: number, requests: number): AggregateRow {
  return { kind: 'latency', hour_ms: null, outcome: null, http_status: null, reason: null, bucket, requests }
}

const zero = { requests: 0, created: 0, updated: 0, spam: 0, error: 0, rejected: 0 }

describe('foldAggregates', () => {
  test('no rows: zero totals, 24 empty consecutive hours, no rate, no latency', () => {
    const folded = foldAggregates([], FROM, HOURS)
    expect(folded.totals).toEqual(zero)
    expect(folded.rejections).toEqual([])
    expect(folded.success_rate).toBeNull()
    expect(folded.latency_ms).toEqual({ p50: null, p95: null, samples: 0 })
    expect(folded.hourly).toHaveLength(HOURS)
    folded.hourly.forEach((bucket, index) => {
      expect(bucket).toEqual({
        from: new Date(FROM + index * HOUR_MS).toISOString(),
        to: new Date(FROM + (index + 1) * HOUR_MS).toISOString(),
        ...zero,
      })
    })
  })

  // Every outcome, in the first, a middle and the last hour of the window.
  for (const outcome of OUTCOMES) {
    for (const hour of [0, 11, HOURS - 1]) {
      test(`${outcome} in hour ${hour}: counted in its hour and in the totals; roll-up and live rows add up`, () => {
        const folded = foldAggregates([count(hour, outcome, 3), count(hour, outcome, 4)], FROM, HOURS)
        expect(folded.totals).toEqual({ ...zero, requests: 7, [outcome]: 7 })
        expect(folded.hourly[hour]).toMatchObject({ ...zero, requests: 7, [outcome]: 7 })
        const others = folded.hourly.filter((_, index) => index !== hour)
        expect(others.every((bucket) => bucket.requests === 0)).toBe(true)
      })
    }
  }

  test('rows outside the window are ignored', () => {
    const folded = foldAggregates([count(-1, 'created', 5), count(HOURS, 'created', 5)], FROM, HOURS)
    expect(folded.totals).toEqual(zero)
    expect(folded.success_rate).toBeNull()
  })

  const rates: Array<[string, AggregateRow[], number]> = [
    [
      'created, updated and spam are successes',
      [count(0, 'created', 1), count(1, 'updated', 1), count(2, 'spam', 1)],
      1,
    ],
    [
      'error and rejected are failures',
      [count(0, 'error', 1), count(0, 'rejected', 1, 429, 'rate_limited')],
      0,
    ],
    ['rounded to 4 decimals', [count(0, 'created', 2), count(0, 'error', 1)], 0.6667],
    [
      'a row counts for all the requests it stands for',
      [count(0, 'spam', 1), count(0, 'rejected', 99, 429, 'rate_limited')],
      0.01,
    ],
  ]
  for (const [name, rows, rate] of rates) {
    test(`success rate: ${name}`, () => {
      expect(foldAggregates(rows, FROM, HOURS).success_rate).toBe(rate)
    })
  }

  test('rejections: one entry per status and reason, summed over hours, most first, then by reason', () => {
    const folded = foldAggregates(
      [
        count(0, 'rejected', 2, 403, 'ip_not_allowed'),
        count(5, 'rejected', 3, 403, 'ip_not_allowed'),
        count(1, 'rejected', 5, 400, 'invalid_json'),
        count(2, 'rejected', 7, 429, 'rate_limited'),
        count(3, 'rejected', 1, 404, null),
        count(3, 'error', 9, 200, 'missing_contact'),
      ],
      FROM,
      HOURS,
    )
    expect(folded.rejections).toEqual([
      { reason: 'rate_limited', http_status: 429, count: 7 },
      { reason: 'invalid_json', http_status: 400, count: 5 },
      { reason: 'ip_not_allowed', http_status: 403, count: 5 },
      { reason: 'unknown', http_status: 404, count: 1 },
    ])
  })

  // Buckets are 8 per doubling: bucket b holds durations up to 2^(b/8) ms.
  const percentiles: Array<[string, AggregateRow[], { p50: number; p95: number; samples: number }]> = [
    ['one bucket: both are its upper bound', [latency(8, 10)], { p50: 2, p95: 2, samples: 10 }],
    [
      'rows of one bucket add up before ranking',
      [latency(8, 30), latency(16, 40), latency(8, 30)],
      { p50: 2, p95: 4, samples: 100 },
    ],
    [
      'the 95th of 100 still in the fast bucket: p95 is that bucket',
      [latency(24, 5), latency(8, 95)],
      { p50: 2, p95: 2, samples: 100 },
    ],
    [
      'the 95th of 100 past the fast bucket: p95 is the next bucket',
      [latency(24, 5), latency(8, 94), latency(16, 1)],
      { p50: 2, p95: 4, samples: 100 },
    ],
    ['ranks round up', [latency(8, 1), latency(16, 1)], { p50: 2, p95: 4, samples: 2 }],
  ]
  for (const [name, rows, expected] of percentiles) {
    test(`latency: ${name}`, () => {
      expect(foldAggregates(rows, FROM, HOURS).latency_ms).toEqual(expected)
    })
  }
})
