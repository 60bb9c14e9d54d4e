import { describe, expect, test } from 'bun:test'
import { desc, eq } from 'drizzle-orm'
import { deliveryLogs, leads } from '../../src/db/schema'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSource } from '../helpers/factories'
import { makeTestApp, request } from '../helpers/test-app'

/**
 * Issue 15 item 12: with a domain allow list, a request whose Origin names no host (`null`, or
 * anything that is not a URL) is refused, whatever its Referer says, and `null` is never echoed as
 * Access-Control-Allow-Origin: on POST, on the informational GET, and on the preflight.
 */
async function setup(domainAllowlist: string[]) {
  const { app, ctx } = await makeTestApp()
  const organization = await createOrganization(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, { domainAllowlist })
  return { app, ctx, source, apiKey }
}

const email = () => uniqueEmail('lead')

// Origins that name no host, each with a Referer on the allow list beside it.
const HOSTLESS_ORIGINS = ['null', 'file://', 'not a url', 'data:text/html,x', ''] as const
const ALLOWED_REFERERS = ['https://shop.test/checkout', 'https://www.shop.test/', undefined] as const

describe('Origin without a host, on a source with a domain allow list', () => {
  for (const origin of HOSTLESS_ORIGINS) {
    for (const referer of ALLOWED_REFERERS) {
      const label = `Origin ${JSON.stringify(origin)}, Referer ${referer ?? '(none)'}`
      const headers: Record<string, string> = { origin }
      if (referer) headers.referer = referer

      test(`POST: 403 domain_not_allowed, no lead, never echoed (${label})`, async () => {
        const { app, ctx, source, apiKey } = await setup(['shop.test', '*.shop.test'])
        const response = await app.handle(
          request('POST', `/api/webhook/lead/${apiKey}`, { json: { email: email() }, headers }),
        )
        expect(response.status).toBe(403)
        expect(response.headers.get('access-control-allow-origin')).not.toBe('null')
        if (origin === 'null') expect(response.headers.get('access-control-allow-origin')).toBeNull()
        expect(response.headers.get('x-request-id')).toBeTruthy()
        expect(await response.json()).toEqual({
          error: 'domain_not_allowed',
          message: expect.any(String),
          request_id: response.headers.get('x-request-id'),
        })
        expect(await ctx.db.select().from(leads).where(eq(leads.sourceId, source.id))).toEqual([])
        const [log] = await ctx.db
          .select()
          .from(deliveryLogs)
          .where(eq(deliveryLogs.sourceId, source.id))
          .orderBy(desc(deliveryLogs.id))
        expect(log).toMatchObject({ httpStatus: 403, outcome: 'rejected', reason: 'domain_not_allowed' })
      })

      test(`OPTIONS: 403 without CORS headers (${label})`, async () => {
        const { app, apiKey } = await setup(['shop.test', '*.shop.test'])
        const response = await app.handle(
          request('OPTIONS', `/api/webhook/lead/${apiKey}`, {
            headers: { ...headers, 'access-control-request-method': 'POST' },
          }),
        )
        expect(response.status).toBe(403)
        expect(response.headers.get('access-control-allow-origin')).toBeNull()
        expect((await response.json()).error).toBe('domain_not_allowed')
      })
    }
  }

  test('GET (informational) never echoes Origin: null', async () => {
    const { app, apiKey } = await setup(['shop.test'])
    const response = await app.handle(
      request('GET', `/api/webhook/lead/${apiKey}`, {
        headers: { origin: 'null', referer: 'https://shop.test/' },
      }),
    )
    expect(response.status).toBe(200)
    expect(response.headers.get('access-control-allow-origin')).toBeNull()
  })

  test('an allowed Origin still passes and is echoed; Referer alone still counts when Origin is absent', async () => {
    const { app, apiKey } = await setup(['shop.test'])
    const byOrigin = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        json: { email: email() },
        headers: { origin: 'https://shop.test' },
      }),
    )
    expect(byOrigin.status).toBe(200)
    expect(byOrigin.headers.get('access-control-allow-origin')).toBe('https://shop.test')
    const byReferer = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        json: { email: email() },
        headers: { referer: 'https://shop.test/form' },
      }),
    )
    expect(byReferer.status).toBe(200)
    // An allowed Referer does not rescue a disallowed Origin either.
    const mixed = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        json: { email: email() },
        headers: { origin: 'https://evil.test', referer: 'https://shop.test/form' },
      }),
    )
    expect(mixed.status).toBe(403)
  })

  test('without a domain allow list Origin: null passes and is answered with *, not null', async () => {
    const { app, apiKey } = await setup([])
    const response = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        json: { email: email() },
        headers: { origin: 'null' },
      }),
    )
    expect(response.status).toBe(200)
    expect(response.headers.get('access-control-allow-origin')).toBe('*')
  })
})
