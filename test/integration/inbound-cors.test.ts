import { describe, expect, test } from 'bun:test'
import { generateSecret } from '../../src/lib/secrets'
import { type App, email, logsOf, post, setup } from '../helpers/inbound'
import { request } from '../helpers/test-app'

// CORS on the webhook URL: preflight and the headers of every answer (Origin without a host: inbound-origin.test.ts).

describe('CORS', () => {
  test('preflight: * without a domain allow list; echoed origin when allowed; 403 otherwise', async () => {
    const open = await setup()
    const preflight = (app: App, key: string, origin: string) =>
      app.handle(
        request('OPTIONS', `/api/webhook/lead/${key}`, {
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'content-type',
          },
        }),
      )
    const anyOrigin = await preflight(open.app, open.apiKey, 'https://anything.test')
    expect(anyOrigin.status).toBe(204)
    expect(anyOrigin.headers.get('access-control-allow-origin')).toBe('*')
    expect(anyOrigin.headers.get('access-control-allow-methods')).toBe('POST, GET, OPTIONS')
    expect(anyOrigin.headers.get('access-control-allow-headers')).toBe('Content-Type, X-Request-Id')
    expect(anyOrigin.headers.get('access-control-max-age')).toBe('600')

    const closed = await setup({ domainAllowlist: ['*.shop.test'] })
    const allowed = await preflight(closed.app, closed.apiKey, 'https://www.shop.test')
    expect(allowed.status).toBe(204)
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://www.shop.test')
    expect(allowed.headers.get('vary')).toBe('Origin')
    const refused = await preflight(closed.app, closed.apiKey, 'https://evil.test')
    expect(refused.status).toBe(403)
    expect(refused.headers.get('access-control-allow-origin')).toBeNull()
    expect((await refused.json()).error).toBe('domain_not_allowed')
    const [log] = await logsOf(closed.ctx, closed.source.id)
    expect(log).toMatchObject({ method: 'OPTIONS', httpStatus: 403, reason: 'domain_not_allowed' })

    const unknown = await preflight(open.app, generateSecret('source_key'), 'https://a.test')
    expect(unknown.status).toBe(404)
  })

  test('responses, errors included, carry CORS headers for browsers', async () => {
    const { app, apiKey } = await setup({ domainAllowlist: ['shop.test'] })
    const ok = await post(app, apiKey, { email: email() }, { origin: 'https://shop.test' })
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://shop.test')
    expect(ok.headers.get('access-control-expose-headers')).toContain('X-RateLimit-Remaining')
    const refused = await post(app, apiKey, { email: email() }, { origin: 'https://other.test' })
    expect(refused.status).toBe(403)
    expect(refused.headers.get('access-control-allow-origin')).toBe('https://other.test')
    const invalid = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: '{',
        headers: { origin: 'https://shop.test', 'content-type': 'application/json' },
      }),
    )
    expect(invalid.status).toBe(400)
    expect(invalid.headers.get('access-control-allow-origin')).toBe('https://shop.test')
  })
})
