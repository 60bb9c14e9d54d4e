import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { email, logsOf, post, setup } from '../helpers/inbound'
import { loggedLines, makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

// The order of the pipeline (spec §4): the limit and the allow lists come before the body, so a
// request they refuse answers that refusal whatever its body, and nothing of the body acts or is
// logged. The per-key limit is decided by the database in the statement that ends the request
// (docs/architecture.md "One round trip"), after the body was read: its 429 still wins. Kept as a class test for any change that moves body work earlier (docs/architecture.md,
// "One round trip instead of two": option C was tried that way).

const CARD_BODY = () => ({ email: email(), card_number: '4111 1111 1111 1111' })
const NOT_AN_OBJECT = 'a JSON string, not an object'

interface Case {
  label: string
  status: number
  error: string
  /** Sends the request that must be refused before its body counts. */
  refusedWith(body: unknown): Promise<Response>
}

async function cases(): Promise<Array<Case & { ctx: Awaited<ReturnType<typeof setup>>['ctx'] }>> {
  const clock = new FakeClock()
  const limited = await setup({}, { clock })
  // The key's 60 requests of the minute, then every request is over the limit.
  for (let index = 0; index < 60; index++) await post(limited.app, limited.apiKey, { email: email() })
  // The same key on a second replica (an app of its own on the same database) that never saw the
  // 60: its pre-check knows nothing, the database decides the 429 after the body was read.
  const otherReplica = await makeTestApp({ clock })
  const byIp = await setup({ ipAllowlist: ['203.0.113.7'] })
  const byDomain = await setup({ domainAllowlist: ['shop.test'] })
  return [
    {
      label: 'over the key limit',
      status: 429,
      error: 'rate_limited',
      ctx: limited.ctx,
      refusedWith: (body) => post(limited.app, limited.apiKey, body),
    },
    {
      label: 'over the key limit, counted on another replica',
      status: 429,
      error: 'rate_limited',
      ctx: otherReplica.ctx,
      refusedWith: (body) => post(otherReplica.app, limited.apiKey, body),
    },
    {
      label: 'outside the IP allow list',
      status: 403,
      error: 'ip_not_allowed',
      ctx: byIp.ctx,
      refusedWith: (body) => post(byIp.app, byIp.apiKey, body, { 'x-forwarded-for': '198.51.100.1' }),
    },
    {
      label: 'outside the domain allow list',
      status: 403,
      error: 'domain_not_allowed',
      ctx: byDomain.ctx,
      refusedWith: (body) => post(byDomain.app, byDomain.apiKey, body, { origin: 'https://elsewhere.test' }),
    },
  ]
}

const cardLines = (ctx: Parameters<typeof loggedLines>[0]) =>
  loggedLines(ctx).filter((line) => line.msg === 'card data removed from an inbound body')

describe('inbound: the body acts only once the request is admitted', () => {
  test('an admitted body with card data logs its removal (the control for the cases below)', async () => {
    const { app, ctx, apiKey } = await setup()
    const response = await post(app, apiKey, CARD_BODY())
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ success: true })
    expect(cardLines(ctx)).toHaveLength(1)
  })

  test('every refusal that comes before the body wins over a body with card data or a body that is not an object', async () => {
    for (const refusal of await cases()) {
      for (const body of [CARD_BODY(), NOT_AN_OBJECT]) {
        const response = await refusal.refusedWith(body)
        expect({ case: refusal.label, status: response.status }).toEqual({
          case: refusal.label,
          status: refusal.status,
        })
        expect(response.headers.get('content-type')).toContain('application/json')
        expect(await response.json()).toMatchObject({ error: refusal.error })
      }
      expect({ case: refusal.label, lines: cardLines(refusal.ctx) }).toEqual({
        case: refusal.label,
        lines: [],
      })
    }
  })

  test('a refused request logs its refusal without the body', async () => {
    const { app, ctx, source, apiKey } = await setup({ ipAllowlist: ['203.0.113.7'] })
    const response = await post(app, apiKey, CARD_BODY(), { 'x-forwarded-for': '198.51.100.1' })
    expect(response.status).toBe(403)
    const [entry] = await logsOf(ctx, source.id)
    expect(entry).toMatchObject({ httpStatus: 403, reason: 'ip_not_allowed', body: null })
  })
})
