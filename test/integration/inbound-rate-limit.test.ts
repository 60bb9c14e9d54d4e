import { describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { createSource } from '../helpers/factories'
import { email, logsOf, post, setup } from '../helpers/inbound'

// The per-key limit of the webhook URL, and the aggregated log of its 429s.

describe('POST /api/webhook/lead/{api_key}: refusals', () => {
  test('the 61st request in a minute on one key is a 429 while another key still passes', async () => {
    const clock = new FakeClock()
    const { app, ctx, services, organization, source, apiKey } = await setup({}, { clock })
    const other = await createSource(ctx, organization.id)
    for (let index = 0; index < 60; index++) {
      const response = await post(app, apiKey, { email: email() })
      expect(response.status).toBe(200)
      clock.advance(100)
    }
    const refused = await post(app, apiKey, { email: email() }, { origin: 'https://site.test' })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('60')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(refused.headers.get('access-control-allow-origin')).toBe('*')
    expect(await refused.json()).toEqual({
      error: 'rate_limited',
      message: expect.any(String),
      request_id: refused.headers.get('x-request-id'),
      limit: 60,
      remaining: 0,
      retry_after: 60,
    })
    expect((await post(app, other.apiKey, { email: email() })).status).toBe(200)
    // A flood of 429s is aggregated into one row that counts them.
    for (let index = 0; index < 99; index++)
      expect((await post(app, apiKey, { email: email() })).status).toBe(429)
    await services.inbound.rejections.flush()
    const throttled = (await logsOf(ctx, source.id)).filter((log) => log.httpStatus === 429)
    expect(throttled).toHaveLength(1)
    expect(throttled[0]).toMatchObject({ outcome: 'rejected', reason: 'rate_limited', repeatCount: 100 })
    // The oldest request leaves the window: one slot frees.
    clock.advance(60_000 - 6_000)
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
  })
})
