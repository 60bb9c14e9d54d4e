import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookSources } from '../../src/db/schema'
import { digestSecret, isWellFormedSecret } from '../../src/lib/secrets'
import { BASE, createViaApi, expectJsonHeaders, ISO, RECORD_KEYS, setup } from '../helpers/sources'
import { call, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// Creating a source: the record, its key once, and the validation of its settings.

describe('POST /api/webhook/sources', () => {
  test('201: the record plus api_key and webhook_url; only the digest and the last 4 are stored', async () => {
    const { app, ctx, services, token, organization } = await setup()
    const response = await call(app, token, 'POST', BASE, { name: '  Contact form  ' })
    expect(response.status).toBe(201)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(Object.keys(body).sort()).toEqual([...RECORD_KEYS, 'api_key', 'webhook_url'].sort())
    expect(body).toMatchObject({
      name: 'Contact form',
      enabled: true,
      ip_allowlist: [],
      domain_allowlist: [],
      field_mapping: {},
      default_country: null,
      spam_filter: true,
      key_rotated_at: null,
      last_request_at: null,
    })
    expect(isWellFormedSecret('source_key', body.api_key)).toBe(true)
    expect(body.webhook_url).toBe(`http://lead-capture.test/api/webhook/lead/${body.api_key}`)
    expect(body.key_hint).toBe(body.api_key.slice(-4))
    expect(body.created_at).toMatch(ISO)
    expect(body.updated_at).toBe(body.created_at)
    const [row] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, body.id))
    expect(row!.organizationId).toBe(organization.id)
    expect(row!.keyDigest).toBe(digestSecret(body.api_key))
    expect(JSON.stringify(row)).not.toContain(body.api_key)
    // The new key works on the inbound path at once.
    expect((await services.sourceCache.findByKeyDigest(digestSecret(body.api_key)))?.id).toBe(body.id)
  })

  test('accepts IPv4, IPv6, CIDRs of both, hostnames, *.example.com, a mapping and a country', async () => {
    const { app, token } = await setup()
    const body = await createViaApi(app, token, {
      enabled: false,
      spam_filter: false,
      ip_allowlist: ['203.0.113.7', ' 198.51.100.0/24 ', '2001:db8::1', '2001:db8::/32', '::ffff:10.0.0.1'],
      domain_allowlist: ['Example.com', '*.example.com', 'forms.example.co.uk', 'localhost'],
      field_mapping: { your_email: 'email', tel: 'phone_raw', name: 'full_name', co: 'custom.company' },
      default_country: 'de',
    })
    expect(body).toMatchObject({
      enabled: false,
      spam_filter: false,
      ip_allowlist: ['203.0.113.7', '198.51.100.0/24', '2001:db8::1', '2001:db8::/32', '::ffff:10.0.0.1'],
      domain_allowlist: ['example.com', '*.example.com', 'forms.example.co.uk', 'localhost'],
      field_mapping: { your_email: 'email', tel: 'phone_raw', name: 'full_name', co: 'custom.company' },
      default_country: 'DE',
    })
  })

  test('400 validation_failed names every bad allow-list entry, mapping target and country', async () => {
    const { app, token } = await setup()
    const response = await call(app, token, 'POST', BASE, {
      name: 'Bad',
      ip_allowlist: ['10.0.0.1', '10.0.0.0/33', 'not-an-ip', '2001:db8::/129'],
      domain_allowlist: ['example.com', 'https://example.com', '*.com', 'exa mple.com', 'example.com:8080'],
      field_mapping: { ok: 'email', bad: 'phone', worse: 'custom.', weird: 'custom.a b' },
      default_country: 'XX',
    })
    expect(response.status).toBe(400)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(body).toMatchObject({ error: 'validation_failed', request_id: expect.any(String) })
    const paths = body.details.map((detail: { path: string }) => detail.path)
    expect(paths).toEqual([
      '/ip_allowlist/1',
      '/ip_allowlist/2',
      '/ip_allowlist/3',
      '/domain_allowlist/1',
      '/domain_allowlist/2',
      '/domain_allowlist/3',
      '/domain_allowlist/4',
      '/field_mapping/bad',
      '/field_mapping/worse',
      '/field_mapping/weird',
      '/default_country',
    ])
    expect(body.details[0].message).toContain('"10.0.0.0/33"')
    expect(body.details[3].message).toContain('"https://example.com"')
    expect(body.details[7].message).toContain('"phone"')
  })

  test('400 for schema violations: name, list sizes, mapping size, types', async () => {
    const { app, token } = await setup()
    const cases: unknown[] = [
      {},
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(201) },
      {
        name: 'ok',
        ip_allowlist: Array.from({ length: 101 }, (_, index) => `10.0.${index >> 8}.${index & 255}`),
      },
      { name: 'ok', domain_allowlist: Array.from({ length: 101 }, (_, index) => `d${index}.example.com`) },
      {
        name: 'ok',
        field_mapping: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`f${i}`, 'email'])),
      },
      { name: 'ok', spam_filter: 'yes' },
      { name: 'ok', default_country: 'DEU' },
    ]
    for (const json of cases) {
      const response = await call(app, token, 'POST', BASE, json)
      expect({ json, status: response.status }).toEqual({ json, status: 400 })
      const body = await response.json()
      expect(body.error).toBe('validation_failed')
      expect(body.details.length).toBeGreaterThan(0)
    }
    // 100 entries is the limit, not over it.
    const atLimit = await call(app, token, 'POST', BASE, {
      name: 'ok',
      ip_allowlist: Array.from({ length: 100 }, (_, index) => `10.1.0.${index}`),
    })
    expect(atLimit.status).toBe(201)
  })
})
