import { describe, expect, test } from 'bun:test'
import { beganWithin, measuredSpan } from '../../bench/support'

/**
 * `bun run bench:stalls` counts its stalls, slow group statements, disk intervals and collections
 * over the measured seconds only, as its p99 is: the events of the service's start-up and of the
 * open loop's warm-up stay on the timeline but out of the counts (bench/stall-timeline.ts).
 */
describe('measuredSpan', () => {
  test('from the first request due to the last one answered, in any order', () => {
    const samples = [
      { due: 1_000, latency: 2 },
      { due: 1_001, latency: 40 },
      { due: 999, latency: 1 },
      { due: 1_030, latency: 3 },
    ]
    expect(measuredSpan(samples)).toEqual({ from: 999, to: 1_041 })
  })

  test('thirty thousand samples (a run of 30 s at 1,000 requests/s)', () => {
    const samples = Array.from({ length: 30_000 }, (_, index) => ({ due: 5_000 + index, latency: 1 }))
    expect(measuredSpan(samples)).toEqual({ from: 5_000, to: 35_000 })
  })
})

describe('beganWithin', () => {
  const span = { from: 10_000, to: 40_000 }
  test.each([
    ['during start-up', 500, false],
    ['during the warm-up, ending inside the span', 9_999, false],
    ['at the first request due', 10_000, true],
    ['inside', 25_000, true],
    ['at the last answer', 40_000, true],
    ['after the run (the report is written later)', 40_001, false],
  ])('an event that began %s: counted %p', (_name, at, counted) => {
    const event = { at, name: 'stall' }
    expect(beganWithin([event], span)).toEqual(counted ? [event] : [])
  })

  test('keeps the events in their order and as they are', () => {
    const events = [
      { at: 9_000, name: 'group statement' },
      { at: 12_000, name: 'eden collection' },
      { at: 11_000, name: 'stall' },
      { at: 50_000, name: 'job' },
    ]
    expect(beganWithin(events, span)).toEqual(events.slice(1, 3))
  })
})
