import { describe, expect, test } from 'bun:test'
import { generateSecret } from '../../src/lib/secrets'
import { createSource } from '../helpers/factories'
import { email, logsOf, post, setup } from '../helpers/inbound'
import { request } from '../helpers/test-app'

// Refused POSTs: keys, bodies, field types, size, allow lists; each logged for a real source.

describe('POST /api/webhook/lead/{api_key}: refusals', () => {
  test('unknown, disabled, malformed and bad-checksum keys are all the same 404', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const disabled = await createSource(ctx, organization.id, { enabled: false })
    const badChecksum = apiKey.slice(0, -1) + (apiKey.endsWith('A') ? 'B' : 'A')
    const bodies = []
    for (const key of [
      generateSecret('source_key'),
      disabled.apiKey,
      'flwh_short',
      badChecksum,
      'not-a-key',
    ]) {
      const response = await post(app, key, { email: email() })
      expect(response.status).toBe(404)
      expect(response.headers.get('x-ratelimit-limit')).toBe('60')
      const body = await response.json()
      bodies.push({ ...body, request_id: undefined })
      expect(body.request_id).toBe(response.headers.get('x-request-id'))
    }
    for (const body of bodies) {
      expect(body).toEqual({
        error: 'webhook_not_found',
        message: 'webhook not found: the key is unknown or the source is disabled',
        request_id: undefined,
      })
    }
    // The disabled source's owner sees the refusal in its log.
    const [log] = await logsOf(ctx, disabled.source.id)
    expect(log).toMatchObject({ httpStatus: 404, outcome: 'rejected', reason: 'source_disabled' })
  })

  test('disabling a source takes effect at once, also when it is cached', async () => {
    const { app, ctx, services, source, apiKey } = await setup()
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    await ctx.database.query('update webhook_sources set enabled = false where id = $1', [source.id])
    await services.sourceCache.announceChange(source.id)
    expect((await post(app, apiKey, { email: email() })).status).toBe(404)
  })

  test('bodies that are not JSON objects are 400 with a clear code, and logged', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const cases: Array<[BodyInit, Record<string, string>, string]> = [
      ['{"email": ', { 'content-type': 'application/json' }, 'invalid_json'],
      ['[1, 2]', { 'content-type': 'application/json' }, 'invalid_body'],
      ['"text"', { 'content-type': 'application/json' }, 'invalid_body'],
      ['null', { 'content-type': 'application/json' }, 'invalid_body'],
      ['email=a@b.co', { 'content-type': 'application/x-www-form-urlencoded' }, 'invalid_content_type'],
      [new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), { 'content-type': 'application/json' }, 'invalid_body'],
    ]
    for (const [body, headers, code] of cases) {
      const response = await app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { body, headers }))
      expect(response.status).toBe(400)
      const json = await response.json()
      expect(json).toMatchObject({ error: code, message: expect.any(String), request_id: expect.any(String) })
      const [log] = await logsOf(ctx, source.id)
      expect(log).toMatchObject({ httpStatus: 400, outcome: 'rejected', reason: code })
    }
  })

  test('a field of the wrong type or size is a 400 with details naming it', async () => {
    const { app, apiKey } = await setup()
    const response = await post(app, apiKey, {
      email: 42,
      first_name: ['a'],
      status: 'x'.repeat(51),
      phone_raw: null,
    })
    expect(response.status).toBe(400)
    const body = await response.json()
    expect(body.error).toBe('validation_failed')
    expect(body.details).toEqual(
      expect.arrayContaining([
        { path: '/email', message: 'must be a string, got number' },
        { path: '/first_name', message: 'must be a string, got array' },
        { path: '/status', message: 'must be at most 50 characters' },
      ]),
    )
    expect(body.details).toHaveLength(3)
  })

  test('102,400 bytes of valid JSON are accepted; 102,401 bytes are a 413', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const sized = (bytes: number) => {
      const base = JSON.stringify({ email: email(), notes: '' })
      return base.replace('"notes":""', `"notes":"${'x'.repeat(bytes - base.length)}"`)
    }
    const exact = sized(102_400)
    expect(Buffer.byteLength(exact)).toBe(102_400)
    const accepted = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: exact,
        headers: { 'content-type': 'application/json' },
      }),
    )
    expect(accepted.status).toBe(200)
    expect((await accepted.json()).status).toBe('created')

    const over = sized(102_401)
    // Without Content-Length the body is counted while it streams.
    const streamed = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: over,
        headers: { 'content-type': 'application/json' },
      }),
    )
    expect(streamed.status).toBe(413)
    expect(await streamed.json()).toMatchObject({ error: 'payload_too_large', limit_bytes: 102_400 })
    // With a declared Content-Length it is refused without reading.
    const declared = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: over,
        headers: { 'content-type': 'application/json', 'content-length': '102401' },
      }),
    )
    expect(declared.status).toBe(413)
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({
      httpStatus: 413,
      reason: 'payload_too_large',
      bodyBytes: 102_401,
      body: null,
    })
  })

  test('IP allow list: IPv4, IPv6 and CIDR entries', async () => {
    const { app, ctx, source, apiKey } = await setup({
      ipAllowlist: ['203.0.113.7', '2001:db8::/32', '10.1.0.0/16'],
    })
    const from = (ip: string) => post(app, apiKey, { email: email() }, { 'x-forwarded-for': ip })
    expect((await from('203.0.113.7')).status).toBe(200)
    expect((await from('10.1.200.3')).status).toBe(200)
    expect((await from('2001:db8:1::5')).status).toBe(200)
    const refused = await from('203.0.113.8')
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({
      error: 'ip_not_allowed',
      message: expect.stringContaining('203.0.113.8'),
    })
    expect((await from('10.2.0.1')).status).toBe(403)
    expect((await from('2001:db9::1')).status).toBe(403)
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({ httpStatus: 403, reason: 'ip_not_allowed', clientIp: '2001:db9::1' })
  })

  test('domain allow list: exact hosts and *.example.com, from Origin or Referer', async () => {
    const { app, apiKey } = await setup({ domainAllowlist: ['shop.test', '*.example.com'] })
    const withHeaders = (headers: Record<string, string>) => post(app, apiKey, { email: email() }, headers)
    expect((await withHeaders({ origin: 'https://shop.test' })).status).toBe(200)
    expect((await withHeaders({ origin: 'https://www.example.com' })).status).toBe(200)
    expect((await withHeaders({ origin: 'https://a.b.example.com:8443' })).status).toBe(200)
    expect((await withHeaders({ referer: 'https://promo.example.com/landing?x=1' })).status).toBe(200)
    const apex = await withHeaders({ origin: 'https://example.com' })
    expect(apex.status).toBe(403)
    expect((await apex.json()).error).toBe('domain_not_allowed')
    expect((await withHeaders({ origin: 'https://evil-example.com' })).status).toBe(403)
    expect((await withHeaders({ origin: 'https://shop.test.evil.io' })).status).toBe(403)
    expect((await withHeaders({})).status).toBe(403)
  })
})
