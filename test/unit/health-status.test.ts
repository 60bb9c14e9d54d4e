import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { HealthStatus, Outcome } from '../../src/modules/delivery-logs/model'
import { FAILURE_OUTCOMES, healthStatus, SUCCESS_OUTCOMES } from '../../src/modules/delivery-logs/service'

type Row = { outcome: Outcome; repeat_count: number }

// Rows are newest first. `n` requests of one outcome class, spread over rows of every outcome in
// that class so no rule can depend on one outcome name.
function requests(count: number, failed: boolean): Row[] {
  const outcomes = failed ? FAILURE_OUTCOMES : SUCCESS_OUTCOMES
  return Array.from({ length: count }, (_, index) => ({
    outcome: outcomes[index % outcomes.length]!,
    repeat_count: 1,
  }))
}
const ok = (count: number) => requests(count, false)
const failed = (count: number) => requests(count, true)

function status(recent: Row[], successRate: number | null = 1, enabled = true): HealthStatus {
  const requestCount = recent.reduce((sum, row) => sum + row.repeat_count, 0)
  return healthStatus({ enabled, requests: requestCount, successRate, recent })
}

const STATUS_ORDER: HealthStatus[] = ['healthy', 'degraded', 'failing']
const row = fc.record({
  outcome: fc.constantFrom<Outcome>(...SUCCESS_OUTCOMES, ...FAILURE_OUTCOMES),
  repeat_count: fc.integer({ min: 1, max: 30 }),
})
const rows = fc.array(row, { maxLength: 30 })
const rate = fc.option(fc.double({ min: 0, max: 1, noNaN: true }))

describe('healthStatus', () => {
  test('disabled wins over everything else', () => {
    fc.assert(
      fc.property(rows, rate, (recent, successRate) => {
        expect(status(recent, successRate, false)).toBe('disabled')
      }),
    )
  })

  test('idle: enabled and no request in the window', () => {
    for (const successRate of [null, 0, 1]) {
      expect(healthStatus({ enabled: true, requests: 0, successRate, recent: [] })).toBe('idle')
    }
  })

  test('failing: the latest 5 requests all failed, even when most of the latest 20 succeeded', () => {
    for (const before of [[], ok(1), ok(15), ok(100)]) {
      expect(status([...failed(5), ...before])).toBe('failing')
    }
    // 4 in a row and 4 of 20 in all: neither rule holds (the latest failed, so degraded).
    for (const before of [ok(15), ok(100)]) {
      expect(status([...failed(4), ...ok(1), ...before])).toBe('degraded')
    }
  })

  test('failing: more than half of the latest 20 failed, with at least 5 counted', () => {
    const cases: [Row[], HealthStatus][] = [
      [[...ok(1), ...failed(3), ...ok(1), ...failed(8), ...ok(7)], 'failing'], // 11 of 20
      [[...ok(1), ...failed(3), ...ok(1), ...failed(7), ...ok(8)], 'healthy'], // 10 of 20: not more than half
      [[...ok(1), ...failed(2), ...ok(1), ...failed(1)], 'failing'], // 3 of 5
      [[...ok(1), ...failed(3)], 'healthy'], // 3 of 4: fewer than 5 counted
      // Only the latest 20 count: 30 older failures change nothing.
      [[...ok(1), ...failed(3), ...ok(1), ...failed(5), ...ok(10), ...failed(30)], 'healthy'],
    ]
    // A window success rate of 99% and a successful latest request: only the rate rule decides.
    for (const [recent, expected] of cases) expect(status(recent, 0.99)).toBe(expected)
  })

  test('a row counts as repeat_count requests: one aggregated 429 row can make a source failing', () => {
    expect(status([{ outcome: 'rejected', repeat_count: 5 }, ...ok(10)])).toBe('failing')
    expect(status([...ok(1), { outcome: 'rejected', repeat_count: 4 }, ...ok(10)], 0.99)).toBe('healthy')
    expect(status([...ok(1), { outcome: 'rejected', repeat_count: 11 }, ...ok(8)])).toBe('failing')
  })

  test('degraded: the window success rate is under 95%, or the latest request failed', () => {
    for (const successRate of [0, 0.5, 0.949]) expect(status(ok(20), successRate)).toBe('degraded')
    for (const successRate of [0.95, 0.99, 1, null]) expect(status(ok(20), successRate)).toBe('healthy')
    expect(status([...failed(1), ...ok(19)], 1)).toBe('degraded')
  })

  test('healthy: enabled, requests, and no rule above holds', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom<Outcome>(...SUCCESS_OUTCOMES), { minLength: 1 }), (outcomes) => {
        expect(
          status(
            outcomes.map((outcome) => ({ outcome, repeat_count: 1 })),
            1,
          ),
        ).toBe('healthy')
      }),
    )
  })

  test('property: one more failure as the newest request never makes the status better', () => {
    fc.assert(
      fc.property(
        rows,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.constantFrom(...FAILURE_OUTCOMES),
        (recent, successRate, outcome) => {
          fc.pre(recent.length > 0)
          const before = status(recent, successRate)
          const after = status([{ outcome, repeat_count: 1 }, ...recent], successRate)
          expect(STATUS_ORDER.indexOf(after)).toBeGreaterThanOrEqual(STATUS_ORDER.indexOf(before))
        },
      ),
    )
  })
})
