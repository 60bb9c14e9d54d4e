import { describe, expect, test } from 'bun:test'
import { AppError } from '../../src/lib/errors'
import { type BucketState, pickDecisive, rateLimitDecision } from '../../src/lib/rate-limit'

function bucket(overrides: Partial<BucketState>): BucketState {
  return { bucket: 'inbound', limit: 60, remaining: 59, resetMs: 60_000, allowed: true, ...overrides }
}

function decide(...buckets: BucketState[]) {
  return rateLimitDecision({
    allowed: buckets.every((each) => each.allowed),
    decisive: pickDecisive(buckets),
    buckets,
  })
}

describe('rateLimitDecision', () => {
  const allowed: Array<[string, BucketState[], Record<string, string>]> = [
    [
      'one bucket',
      [bucket({})],
      { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59', 'x-ratelimit-reset': '60' },
    ],
    [
      'the bucket with the fewest remaining speaks for the request',
      [
        bucket({ bucket: 'platform', limit: 600_000, remaining: 500_000 }),
        bucket({ remaining: 3, resetMs: 12_345 }),
      ],
      { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '3', 'x-ratelimit-reset': '13' },
    ],
    [
      'the reset is whole seconds, rounded up',
      [bucket({ resetMs: 1 })],
      { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59', 'x-ratelimit-reset': '1' },
    ],
  ]
  for (const [name, buckets, headers] of allowed) {
    test(`allowed, ${name}: the X-RateLimit headers, no Retry-After, no refusal`, () => {
      expect(decide(...buckets)).toEqual({ headers, refusal: null })
    })
  }

  const refused: Array<[string, BucketState, string]> = [
    [
      'a fixed Retry-After (the inbound 60 s)',
      bucket({ allowed: false, remaining: 0, resetMs: 4_000, fixedRetryAfterSeconds: 60 }),
      '60',
    ],
    ['the exact wait, rounded up', bucket({ allowed: false, remaining: 0, resetMs: 4_001 }), '5'],
    ['at least one second', bucket({ allowed: false, remaining: 0, resetMs: 0 }), '1'],
  ]
  for (const [name, refusedBucket, retryAfter] of refused) {
    test(`refused, ${name}: Retry-After beside the X-RateLimit headers, and a 429 naming the bucket`, () => {
      const decision = decide(bucket({ bucket: 'platform', limit: 600_000, remaining: 10 }), refusedBucket)
      expect(decision.headers).toEqual({
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(Math.ceil(refusedBucket.resetMs / 1000)),
        'retry-after': retryAfter,
      })
      expect(decision.refusal).toBeInstanceOf(AppError)
      expect(decision.refusal).toMatchObject({
        status: 429,
        code: 'rate_limited',
        extra: { limit: 60, remaining: 0, retry_after: Number(retryAfter) },
        // The headers travel with the response, not with the error.
        headers: {},
      })
      expect(decision.refusal!.message).toContain(`retry in ${retryAfter} s`)
    })
  }
})
