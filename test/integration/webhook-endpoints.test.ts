import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookDeliveries, webhookEndpoints } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import { isPublicAddress } from '../../src/lib/outbound-url'
import { EVENT_TYPES } from '../../src/modules/webhook-endpoints/model'
import { expectError, type RouteFixture, runCommonRouteTests } from '../helpers/common-route-tests'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { call, makeSignedInApp, makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const BASE = '/api/v2/webhook-endpoints'
const RECORD_KEYS = [
  'created_at',
  'description',
  'disabled_reason',
  'enabled',
  'event_types',
  'id',
  'source_ids',
  'stats',
  'updated_at',
  'url',
].sort()
const SECRET = /^whsec_[A-Za-z0-9+/]{32}$/

const endpointPath =
  (suffix = '') =>
  async (fixture: RouteFixture) =>
    `${BASE}/${(await createWebhookEndpoint(fixture.services, fixture.organizationId)).id}${suffix}`

/** Every route of the module: method, template, path builder, a body that passes validation. */
const ROUTES: Array<[string, string, (fixture: RouteFixture) => string | Promise<string>, unknown]> = [
  ['GET', BASE, () => BASE, undefined],
  ['POST', BASE, () => BASE, { url: 'http://127.0.0.1:9/x' }],
  ['GET', `${BASE}/{id}`, endpointPath(), undefined],
  ['PATCH', `${BASE}/{id}`, endpointPath(), { description: 'x' }],
  ['DELETE', `${BASE}/{id}`, endpointPath(), undefined],
  ['POST', `${BASE}/{id}/rotate-secret`, endpointPath('/rotate-secret'), undefined],
  ['POST', `${BASE}/{id}/test`, endpointPath('/test'), undefined],
  ['GET', `${BASE}/{id}/messages`, endpointPath('/messages'), undefined],
  ['POST', `${BASE}/{id}/messages/{message_id}/retry`, endpointPath(`/messages/${newId()}/retry`), undefined],
  ['POST', `${BASE}/{id}/recover`, endpointPath('/recover'), { since: '2026-01-01T00:00:00Z' }],
]

for (const [method, name, path, body] of ROUTES) {
  runCommonRouteTests({
    name: `${method} ${name}`,
    method,
    path,
    body,
    permission: 'settings.integrations',
    feature: 'integrations',
  })
}

describe('webhook endpoints: CRUD', () => {
  test('create shows the secret once; get, list and patch never show it', async () => {
    const { app, token } = await makeSignedInApp()
    const response = await call(app, token, 'POST', BASE, {
      url: 'http://127.0.0.1:9/hook',
      description: ' CRM ',
      event_types: ['lead.created'],
    })
    expect(response.status).toBe(201)
    expect(response.headers.get('content-type')).toContain('application/json')
    const created = await response.json()
    expect(Object.keys(created).sort()).toEqual(
      [...RECORD_KEYS, 'previous_secret_expires_at', 'secret'].sort(),
    )
    expect(created).toMatchObject({
      url: 'http://127.0.0.1:9/hook',
      description: 'CRM',
      event_types: ['lead.created'],
      source_ids: [],
      enabled: true,
      disabled_reason: null,
      previous_secret_expires_at: null,
      stats: { pending: 0, succeeded: 0, failed: 0, last_attempt_at: null },
    })
    expect(created.secret).toMatch(SECRET)

    for (const [method, path, body] of [
      ['GET', `${BASE}/${created.id}`, undefined],
      ['PATCH', `${BASE}/${created.id}`, { enabled: false }],
    ] as const) {
      const read = await call(app, token, method, path, body)
      expect(read.status).toBe(200)
      const record = await read.json()
      expect(Object.keys(record).sort()).toEqual(RECORD_KEYS)
      expect(JSON.stringify(record)).not.toContain(created.secret)
    }
    const list = await (await call(app, token, 'GET', BASE)).json()
    expect(list.data.map((row: { id: string }) => row.id)).toEqual([created.id])
    expect(list.next_cursor).toBeNull()
    expect(Object.keys(list.data[0]).sort()).toEqual(RECORD_KEYS)
    expect(list.data[0].enabled).toBe(false)
  })

  test('list pages newest first with a cursor', async () => {
    const { app, services, token, organization } = await makeSignedInApp()
    const ids: string[] = []
    for (let index = 0; index < 3; index++)
      ids.push((await createWebhookEndpoint(services, organization.id)).id)
    const first = await (await call(app, token, 'GET', `${BASE}?limit=2`)).json()
    expect(first.data.map((row: { id: string }) => row.id)).toEqual([ids[2], ids[1]])
    const second = await (await call(app, token, 'GET', `${BASE}?limit=2&cursor=${first.next_cursor}`)).json()
    expect(second.data.map((row: { id: string }) => row.id)).toEqual([ids[0]])
    expect(second.next_cursor).toBeNull()
  })

  test('patch changes only what is sent; enabling clears the reason a disable left', async () => {
    const { app, ctx, services, token, organization } = await makeSignedInApp()
    const { source } = await createSource(ctx, organization.id)
    const endpoint = await createWebhookEndpoint(services, organization.id, { description: 'keep' })
    await ctx.db
      .update(webhookEndpoints)
      .set({ enabled: false, disabledReason: 'failing_for_5_days', failingSince: new Date() })
      .where(eq(webhookEndpoints.id, endpoint.id))
    const response = await call(app, token, 'PATCH', `${BASE}/${endpoint.id}`, {
      enabled: true,
      source_ids: [source.id.toUpperCase()],
      event_types: [],
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      description: 'keep',
      enabled: true,
      disabled_reason: null,
      source_ids: [source.id],
      event_types: [],
    })
    const [row] = await ctx.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id))
    expect(row!.failingSince).toBeNull()
  })

  test('delete answers 204, then 404, and takes its deliveries with it', async () => {
    const { app, ctx, services, token, organization } = await makeSignedInApp()
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const other = await createWebhookEndpoint(services, organization.id)
    await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await services.webhookEndpoints.ping(organization.id, other.id)
    const deleted = await call(app, token, 'DELETE', `${BASE}/${endpoint.id}`)
    expect(deleted.status).toBe(204)
    expect(await deleted.text()).toBe('')
    await expectError(await call(app, token, 'GET', `${BASE}/${endpoint.id}`), 404, 'not_found')
    // The cascade is a trigger since drizzle/0015 (no foreign key on the hot path).
    const left = await ctx.db
      .select({ endpointId: webhookDeliveries.endpointId })
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.organizationId, organization.id))
    expect(left).toEqual([{ endpointId: other.id }])
  })

  test('rotate-secret: a new secret, the previous one kept for 24 h', async () => {
    const clock = new FakeClock()
    const { app, ctx, services, token, organization } = await makeSignedInApp({ clock })
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const response = await call(app, token, 'POST', `${BASE}/${endpoint.id}/rotate-secret`)
    expect(response.status).toBe(200)
    const rotated = await response.json()
    expect(rotated.secret).toMatch(SECRET)
    expect(rotated.secret).not.toBe(endpoint.secret)
    expect(rotated.previous_secret_expires_at).toBe(new Date(clock.now() + 24 * 3600 * 1000).toISOString())
    const [row] = await ctx.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id))
    expect(ctx.secretBox.open(row!.secretCiphertext)).toBe(rotated.secret)
    expect(ctx.secretBox.open(row!.previousSecretCiphertext!)).toBe(endpoint.secret)
  })

  test('secrets are stored encrypted, never as written', async () => {
    const { ctx, services, organization } = await makeSignedInApp()
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const [row] = await ctx.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id))
    expect(row!.secretCiphertext).not.toContain(endpoint.secret.slice('whsec_'.length))
    expect(row!.secretCiphertext).toMatch(/^v1\./)
    expect(ctx.secretBox.open(row!.secretCiphertext)).toBe(endpoint.secret)
  })
})

describe('webhook endpoints: validation and limits', () => {
  const bad: Array<[string, Record<string, unknown>, string]> = [
    ['unknown field', { url: 'http://127.0.0.1:9/x', evnt_types: [] }, '/evnt_types'],
    ['no url', {}, '/url'],
    ['url not absolute', { url: 'hooks/x' }, '/url'],
    ['url with credentials', { url: 'http://user:pass@127.0.0.1:9/x' }, '/url'],
    ['ftp url', { url: 'ftp://127.0.0.1/x' }, '/url'],
    ['unknown event type', { url: 'http://127.0.0.1:9/x', event_types: ['lead.deleted'] }, '/event_types/0'],
    ['repeated event type', { url: 'http://127.0.0.1:9/x', event_types: ['ping', 'ping'] }, '/event_types'],
    ['source id not a uuid', { url: 'http://127.0.0.1:9/x', source_ids: ['x'] }, '/source_ids/0'],
    ['unknown source id', { url: 'http://127.0.0.1:9/x', source_ids: [newId()] }, '/source_ids/0'],
    ['long description', { url: 'http://127.0.0.1:9/x', description: 'x'.repeat(501) }, '/description'],
    ['long url', { url: `http://127.0.0.1:9/${'x'.repeat(2048)}` }, '/url'],
  ]
  for (const [label, body, path] of bad) {
    test(`400 for ${label}, on create and on patch`, async () => {
      const { app, services, token, organization } = await makeSignedInApp()
      const created = await expectError(await call(app, token, 'POST', BASE, body), 400, 'validation_failed')
      expect((created.details as Array<{ path: string }>).map((detail) => detail.path)).toContain(path)
      if (!('url' in body) && label !== 'unknown field') return
      const endpoint = await createWebhookEndpoint(services, organization.id)
      const patched = await expectError(
        await call(app, token, 'PATCH', `${BASE}/${endpoint.id}`, body),
        400,
        'validation_failed',
      )
      expect((patched.details as Array<{ path: string }>).map((detail) => detail.path)).toContain(path)
    })
  }

  test('every event type is accepted', async () => {
    const { app, token } = await makeSignedInApp()
    const response = await call(app, token, 'POST', BASE, {
      url: 'http://127.0.0.1:9/x',
      event_types: [...EVENT_TYPES],
    })
    expect(response.status).toBe(201)
    expect((await response.json()).event_types).toEqual([...EVENT_TYPES])
  })

  test("another organization's source cannot be used as a filter", async () => {
    const { app, ctx, token } = await makeSignedInApp()
    const other = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, other.organization.id)
    await expectError(
      await call(app, token, 'POST', BASE, { url: 'http://127.0.0.1:9/x', source_ids: [source.id] }),
      400,
      'validation_failed',
    )
  })

  test('409 endpoint_limit_reached past 50 endpoints', async () => {
    const { app, services, token, organization } = await makeSignedInApp()
    for (let index = 0; index < 50; index++) await createWebhookEndpoint(services, organization.id)
    await expectError(
      await call(app, token, 'POST', BASE, { url: 'http://127.0.0.1:9/x' }),
      409,
      'endpoint_limit_reached',
    )
  })
})

describe('webhook endpoints: SSRF refusals at creation', () => {
  const refused = [
    'http://93.184.216.34/hook', // plain http
    'https://127.0.0.1/hook',
    'https://127.1.2.3/hook',
    'https://0.0.0.0/hook',
    'https://10.1.2.3/hook',
    'https://172.16.0.1/hook',
    'https://192.168.1.1/hook',
    'https://100.64.0.1/hook',
    'https://169.254.169.254/latest/meta-data/',
    'https://224.0.0.1/hook',
    'https://[::1]/hook',
    'https://[::]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://[::ffff:7f00:1]/hook',
    'https://[::ffff:a9fe:a9fe]/hook',
    'https://[64:ff9b::a00:1]/hook',
    'https://[fe80::1]/hook',
    'https://[fd00:ec2::254]/hook',
    'https://[ff02::1]/hook',
    'https://localhost/hook', // a name that resolves to loopback
    'https://localhost:8443/hook',
  ]
  for (const url of refused) {
    test(`refused: ${url}`, async () => {
      const { app, token } = await makeSignedInApp({ env: { OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'false' } })
      const body = await expectError(await call(app, token, 'POST', BASE, { url }), 400, 'validation_failed')
      expect(body.details).toEqual([{ path: '/url', message: expect.any(String) }])
    })
  }

  test('a public IPv4 or IPv6 address is accepted (no DNS needed)', async () => {
    const { app, token } = await makeSignedInApp({ env: { OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'false' } })
    for (const url of ['https://93.184.216.34/hook', 'https://[2606:2800:220:1::1]/hook']) {
      expect((await call(app, token, 'POST', BASE, { url })).status).toBe(201)
    }
  })

  test('a patch to a refused URL is refused too', async () => {
    const { app, services, token, organization } = await makeSignedInApp({
      env: { OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'false' },
    })
    const endpoint = await createWebhookEndpoint(services, organization.id, {
      url: 'https://93.184.216.34/hook',
    })
    await expectError(
      await call(app, token, 'PATCH', `${BASE}/${endpoint.id}`, { url: 'https://127.0.0.1/hook' }),
      400,
      'validation_failed',
    )
  })

  test('isPublicAddress, address by address', () => {
    const cases: Array<[string, boolean]> = [
      ['8.8.8.8', true],
      ['2001:4860:4860::8888', true],
      ['127.0.0.1', false],
      ['::ffff:8.8.8.8', true],
      ['::ffff:10.0.0.1', false],
      ['2001:db8::1', false],
      ['fc00::1', false],
      ['not an ip', false],
    ]
    for (const [address, expected] of cases)
      expect([address, isPublicAddress(address)]).toEqual([address, expected])
  })
})

describe('webhook endpoints: tenant isolation', () => {
  test("every route answers 404 for another organization's endpoint", async () => {
    const { app, ctx, services, token } = await makeSignedInApp()
    const other = await createSignedInUser(ctx)
    const foreign = await createWebhookEndpoint(services, other.organization.id)
    for (const [method, name, , body] of ROUTES) {
      if (!name.includes('{id}')) continue
      const path = name.replace('{id}', foreign.id).replace('{message_id}', newId())
      await expectError(await call(app, token, method, path, body), 404, 'not_found')
    }
    // Unchanged for its owner.
    const owner = await call(app, other.token, 'GET', `${BASE}/${foreign.id}`)
    expect(owner.status).toBe(200)
    expect((await call(app, token, 'GET', BASE).then((response) => response.json())).data).toEqual([])
  })

  test("another organization's message through one's own endpoint: retry is a 404 and leaves it alone", async () => {
    const { app, ctx, services, token, organization } = await makeSignedInApp()
    const own = await createWebhookEndpoint(services, organization.id)
    const other = await createSignedInUser(ctx)
    const foreign = await createWebhookEndpoint(services, other.organization.id)
    const messageId = await services.webhookEndpoints.ping(other.organization.id, foreign.id)
    await expectError(
      await call(app, token, 'POST', `${BASE}/${own.id}/messages/${messageId}/retry`),
      404,
      'not_found',
    )
    const listed = await (await call(app, token, 'GET', `${BASE}/${own.id}/messages`)).json()
    expect(listed.data).toEqual([])
  })

  test('an id that is not a UUID is a 400 naming it (the one rule for ids, docs/api.md); a UUID of nothing is a 404', async () => {
    const { app, token } = await makeTestApp().then(async ({ app, ctx }) => ({
      app,
      token: (await createSignedInUser(ctx)).token,
    }))
    await expectError(await call(app, token, 'GET', `${BASE}/not-a-uuid`), 400, 'validation_failed')
    await expectError(await call(app, token, 'GET', `${BASE}/${crypto.randomUUID()}`), 404, 'not_found')
  })
})
