import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { leads } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { runCommonRouteTests } from '../helpers/common-route-tests'
import {
  createLead,
  createPat,
  createSession,
  createSignedInUser,
  createSource,
  createUser,
} from '../helpers/factories'
import { call, makeSignedInApp, makeTestApp, request, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

type App = Awaited<ReturnType<typeof makeTestApp>>['app']

const BASE = '/api/v2/leads'
const LEAD_KEYS = [
  'attribution',
  'created_at',
  'custom_fields',
  'email',
  'first_name',
  'last_name',
  'lead_id',
  'phone_e164',
  'phone_raw',
  'source_id',
  'status',
  'updated_at',
].sort()

const setup = makeSignedInApp

function expectJsonHeaders(response: Response) {
  expect(response.headers.get('content-type')).toContain('application/json')
  expect(response.headers.get('x-request-id')).toBeTruthy()
  expect(response.headers.get('x-ratelimit-limit')).toBe('100')
  expect(response.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/)
  expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/)
}

/** Every lead id the query returns, following next_cursor to the end; also counts the pages. */
async function collect(app: App, token: string, query: string, limit: number) {
  const ids: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const path: string = `${BASE}?limit=${limit}${query ? `&${query}` : ''}${cursor ? `&cursor=${cursor}` : ''}`
    const response = await call(app, token, 'GET', path)
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(body.data.length).toBeLessThanOrEqual(limit)
    for (const lead of body.data) ids.push(lead.lead_id)
    cursor = body.next_cursor
    pages++
  } while (cursor)
  return { ids, pages }
}

describe('GET /api/v2/leads', () => {
  test('newest first; cursor pages are disjoint and complete; other organizations’ leads absent', async () => {
    const { app, ctx, token, organization } = await setup()
    const other = await createSignedInUser(ctx)
    await createLead(ctx, other.organization.id)
    const created: string[] = []
    for (let index = 0; index < 7; index++) created.push((await createLead(ctx, organization.id)).id)
    const first = await call(app, token, 'GET', `${BASE}?limit=3`)
    expect(first.status).toBe(200)
    expectJsonHeaders(first)
    const body = await first.json()
    expect(Object.keys(body).sort()).toEqual(['data', 'next_cursor'])
    expect(typeof body.next_cursor).toBe('string')
    const { ids, pages } = await collect(app, token, '', 3)
    expect(pages).toBe(3)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids).toEqual([...created].reverse())
  })

  test('the lead JSON has exactly the documented fields', async () => {
    const { app, ctx, token, organization } = await setup()
    const { source } = await createSource(ctx, organization.id)
    const lead = await createLead(ctx, organization.id, {
      sourceId: source.id,
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: 'Ada@Example.com',
      phoneRaw: '020 7946 0958',
      phoneE164: '+442079460958',
      status: 'new',
      customFields: { company: 'Engines' },
      attribution: { utm_source: 'newsletter' },
    })
    const body = await (await call(app, token, 'GET', BASE)).json()
    expect(body.data).toHaveLength(1)
    expect(Object.keys(body.data[0]).sort()).toEqual(LEAD_KEYS)
    expect(body.data[0]).toEqual({
      lead_id: lead.id,
      source_id: source.id,
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'Ada@Example.com',
      phone_raw: '020 7946 0958',
      phone_e164: '+442079460958',
      status: 'new',
      custom_fields: { company: 'Engines' },
      attribution: { utm_source: 'newsletter' },
      created_at: lead.createdAt.toISOString(),
      updated_at: lead.updatedAt.toISOString(),
    })
  })

  test('source_id, created_after and q filter, combine, and paginate', async () => {
    const { app, ctx, token, organization } = await setup()
    const a = (await createSource(ctx, organization.id)).source
    const b = (await createSource(ctx, organization.id)).source
    const day = (n: number) => new Date(Date.UTC(2026, 0, n))
    const bob = await createLead(ctx, organization.id, {
      sourceId: a.id,
      email: 'Bob@ACME.io',
      createdAt: day(1),
    })
    const carol = await createLead(ctx, organization.id, {
      sourceId: a.id,
      email: 'carol@acme.io',
      createdAt: day(3),
    })
    const dave = await createLead(ctx, organization.id, {
      sourceId: b.id,
      email: null,
      phoneRaw: '020 7946 0958',
      phoneE164: '+442079460958',
      createdAt: day(4),
    })
    const erin = await createLead(ctx, organization.id, {
      sourceId: b.id,
      email: 'erin@other.org',
      createdAt: day(5),
    })
    const percent = await createLead(ctx, organization.id, {
      sourceId: b.id,
      email: '100%_real@x.org',
      createdAt: day(6),
    })

    const ids = async (query: string, limit = 2) => (await collect(app, token, query, limit)).ids
    expect(await ids(`source_id=${a.id}`)).toEqual([carol.id, bob.id])
    expect(await ids(`source_id=${b.id}`)).toEqual([percent.id, erin.id, dave.id])
    expect(await ids('created_after=2026-01-03T00:00:00.000Z')).toEqual([percent.id, erin.id, dave.id])
    expect(await ids('created_after=2026-01-02T00:00:00Z')).toEqual([percent.id, erin.id, dave.id, carol.id])
    // e-mail: case-insensitive substring and exact normalised address
    expect(await ids('q=ACME', 1)).toEqual([carol.id, bob.id])
    expect(await ids(`q=${encodeURIComponent(' bob@acme.io ')}`)).toEqual([bob.id])
    // phone: substring of the typed phone, the same number in E.164, digits inside E.164
    expect(await ids(`q=${encodeURIComponent('7946 0958')}`)).toEqual([dave.id])
    expect(await ids(`q=${encodeURIComponent('+44 (20) 7946-0958')}`)).toEqual([dave.id])
    expect(await ids('q=2079460958')).toEqual([dave.id])
    // LIKE wildcards in q are literal characters
    expect(await ids(`q=${encodeURIComponent('%_')}`)).toEqual([percent.id])
    expect(await ids('q=nobody')).toEqual([])
    // combined
    expect(await ids(`source_id=${a.id}&created_after=2026-01-02T00:00:00Z&q=acme`)).toEqual([carol.id])
  })

  test('400 for a bad limit, cursor, source_id or created_after', async () => {
    const { app, token } = await setup()
    for (const query of [
      'limit=0',
      'limit=201',
      'cursor=xyz',
      'source_id=not-a-uuid',
      'created_after=yesterday',
      'created_after=2026-13-01T00:00:00Z',
    ]) {
      const response = await call(app, token, 'GET', `${BASE}?${query}`)
      expect({ query, status: response.status }).toEqual({ query, status: 400 })
      expectJsonHeaders(response)
      const body = await response.json()
      expect(body.error).toBe('validation_failed')
      expect(body.details.length).toBeGreaterThan(0)
    }
  })
})

describe('GET /api/v2/leads/{id}', () => {
  test('200 with the lead; 404 for another organization’s lead or an unknown id', async () => {
    const { app, ctx, token, organization } = await setup()
    const lead = await createLead(ctx, organization.id, { firstName: 'Grace' })
    const response = await call(app, token, 'GET', `${BASE}/${lead.id}`)
    expect(response.status).toBe(200)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(Object.keys(body).sort()).toEqual(LEAD_KEYS)
    expect(body).toMatchObject({ lead_id: lead.id, first_name: 'Grace', source_id: null })

    const theirs = await createLead(ctx, (await createSignedInUser(ctx)).organization.id)
    for (const id of [theirs.id, '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e']) {
      const missing = await call(app, token, 'GET', `${BASE}/${id}`)
      expect({ id, status: missing.status }).toEqual({ id, status: 404 })
      expectJsonHeaders(missing)
      expect(await missing.json()).toEqual({
        error: 'not_found',
        message: 'lead not found',
        request_id: missing.headers.get('x-request-id'),
      })
    }
  })
})

describe('PATCH /api/v2/leads/{id}', () => {
  test('a misspelt field is a 400 naming it, and nothing changes', async () => {
    const { app, ctx, token, organization } = await setup()
    const lead = await createLead(ctx, organization.id, { firstName: 'Ada' })
    const response = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, { firstname: 'Grace' })
    expect(response.status).toBe(400)
    expect(response.headers.get('content-type')).toContain('application/json')
    const body = await response.json()
    expect(body).toMatchObject({
      error: 'validation_failed',
      request_id: response.headers.get('x-request-id'),
    })
    expect(body.details).toEqual([{ path: '/firstname', message: expect.stringContaining('unknown field') }])
    const after = await (await call(app, token, 'GET', `${BASE}/${lead.id}`)).json()
    expect(after.first_name).toBe('Ada')
  })

  test('edits the fields sent, recomputes the dedup keys with the source country, bumps updated_at', async () => {
    const clock = new FakeClock()
    const { app, ctx, token, organization } = await setup({ clock })
    const { source } = await createSource(ctx, organization.id, { defaultCountry: 'DE' })
    const lead = await createLead(ctx, organization.id, {
      sourceId: source.id,
      firstName: 'Old',
      lastName: 'Name',
      customFields: { a: 1 },
    })
    clock.advance(60_000)
    const response = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, {
      first_name: ' Ada ',
      email: '  Ada.Lovelace@Example.COM ',
      phone_raw: '030 1234567',
      status: 'qualified',
      custom_fields: { company: 'Engines', size: 12 },
    })
    expect(response.status).toBe(200)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(body).toEqual({
      lead_id: lead.id,
      source_id: source.id,
      first_name: 'Ada',
      last_name: 'Name',
      email: 'Ada.Lovelace@Example.COM',
      phone_raw: '030 1234567',
      phone_e164: '+49301234567',
      status: 'qualified',
      custom_fields: { company: 'Engines', size: 12 },
      attribution: {},
      created_at: lead.createdAt.toISOString(),
      updated_at: new Date(clock.now()).toISOString(),
    })
    const [row] = await ctx.db.select().from(leads).where(eq(leads.id, lead.id))
    expect(row).toMatchObject({ emailNormalized: 'ada.lovelace@example.com', phoneE164: '+49301234567' })

    // null clears a field; an empty PATCH changes nothing
    const cleared = await (await call(app, token, 'PATCH', `${BASE}/${lead.id}`, { last_name: null })).json()
    expect(cleared.last_name).toBeNull()
    const unchanged = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, {})
    expect(unchanged.status).toBe(200)
    expect(await unchanged.json()).toEqual(cleared)
  })

  test('without a source country a phone needs its +prefix', async () => {
    const { app, ctx, token, organization } = await setup()
    const lead = await createLead(ctx, organization.id)
    const local = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, { phone_raw: '030 1234567' })
    expect(local.status).toBe(400)
    expect((await local.json()).details).toEqual([
      { path: '/phone_raw', message: expect.stringContaining('+country') },
    ])
    const international = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, {
      phone_raw: '+49 30 1234567',
    })
    expect(international.status).toBe(200)
    expect((await international.json()).phone_e164).toBe('+49301234567')
  })

  test('409 duplicate_lead when the e-mail belongs to another lead of the organization, in any case', async () => {
    const { app, ctx, token, organization } = await setup()
    await createLead(ctx, organization.id, { email: 'Taken@Example.com' })
    const lead = await createLead(ctx, organization.id, { email: 'mine@example.com' })
    const response = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, { email: ' taken@EXAMPLE.com' })
    expect(response.status).toBe(409)
    expectJsonHeaders(response)
    expect(await response.json()).toEqual({
      error: 'duplicate_lead',
      message: 'another lead of this organization already has this e-mail address',
      request_id: response.headers.get('x-request-id'),
    })
    const [row] = await ctx.db.select().from(leads).where(eq(leads.id, lead.id))
    expect(row!.email).toBe('mine@example.com')
    // The same address in another organization is no conflict.
    const other = await createSignedInUser(ctx)
    const theirs = await createLead(ctx, other.organization.id)
    const elsewhere = await call(app, other.token, 'PATCH', `${BASE}/${theirs.id}`, {
      email: 'taken@example.com',
    })
    expect(elsewhere.status).toBe(200)
  })

  test('400 for an invalid e-mail, a long status, bad custom fields, or no contact left', async () => {
    const { app, ctx, token, organization } = await setup()
    const lead = await createLead(ctx, organization.id, { email: 'only@example.com' })
    const cases: Array<[unknown, string]> = [
      [{ email: 'not-an-email' }, '/email'],
      [{ status: 'x'.repeat(51) }, '/status'],
      [{ first_name: 42 }, '/first_name'],
      [{ custom_fields: { 'bad name': 1 } }, '/custom_fields/bad name'],
      [
        { custom_fields: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`f${i}`, i])) },
        '/custom_fields',
      ],
      [{ email: null }, '/'],
      [{ email: '' }, '/'],
    ]
    for (const [json, path] of cases) {
      const response = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, json)
      expect({ json, status: response.status }).toEqual({ json, status: 400 })
      const body = await response.json()
      expect(body.error).toBe('validation_failed')
      expect(body.details.map((detail: { path: string }) => detail.path)).toContain(path)
    }
    const [row] = await ctx.db.select().from(leads).where(eq(leads.id, lead.id))
    expect(row).toMatchObject({ email: 'only@example.com', status: null, customFields: {} })
    // Fifty characters is allowed; removing the e-mail is fine once a phone is there.
    expect((await call(app, token, 'PATCH', `${BASE}/${lead.id}`, { status: 'x'.repeat(50) })).status).toBe(
      200,
    )
    const swapped = await call(app, token, 'PATCH', `${BASE}/${lead.id}`, {
      email: null,
      phone_raw: '+1 212 555 0123',
    })
    expect(swapped.status).toBe(200)
    expect(await swapped.json()).toMatchObject({ email: null, phone_e164: '+12125550123' })
  })

  test('404 for another organization’s lead (unchanged) or an unknown id', async () => {
    const { app, ctx, token } = await setup()
    const theirs = await createLead(ctx, (await createSignedInUser(ctx)).organization.id, { status: 'new' })
    for (const id of [theirs.id, '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e']) {
      const response = await call(app, token, 'PATCH', `${BASE}/${id}`, { status: 'stolen' })
      expect({ id, status: response.status }).toEqual({ id, status: 404 })
      expect((await response.json()).error).toBe('not_found')
    }
    const [row] = await ctx.db.select().from(leads).where(eq(leads.id, theirs.id))
    expect(row!.status).toBe('new')
  })
})

describe('DELETE /api/v2/leads/{id}', () => {
  test('204 with no body; then 404; another organization’s lead is 404 and kept', async () => {
    const { app, ctx, token, organization } = await setup()
    const lead = await createLead(ctx, organization.id)
    const response = await call(app, token, 'DELETE', `${BASE}/${lead.id}`)
    expect(response.status).toBe(204)
    expect(response.headers.get('x-request-id')).toBeTruthy()
    expect(response.headers.get('x-ratelimit-limit')).toBe('100')
    expect(await response.text()).toBe('')
    expect((await call(app, token, 'GET', `${BASE}/${lead.id}`)).status).toBe(404)
    expect((await call(app, token, 'DELETE', `${BASE}/${lead.id}`)).status).toBe(404)
    const theirs = await createLead(ctx, (await createSignedInUser(ctx)).organization.id)
    for (const id of [theirs.id]) {
      const other = await call(app, token, 'DELETE', `${BASE}/${id}`)
      expect(other.status).toBe(404)
      expect((await other.json()).error).toBe('not_found')
    }
    expect(await ctx.db.select().from(leads).where(eq(leads.id, theirs.id))).toHaveLength(1)
  })
})

describe('permissions', () => {
  test('viewer reads but cannot edit or delete; member edits and deletes; no plan feature needed', async () => {
    const { app, ctx } = await setup()
    const free = await createSignedInUser(ctx, { plan: 'free' })
    const lead = await createLead(ctx, free.organization.id)
    const viewer = await createUser(ctx, free.organization.id, { role: 'viewer' })
    const viewerToken = await createSession(ctx, viewer.id)
    const member = await createUser(ctx, free.organization.id, { role: 'member' })
    const memberToken = await createSession(ctx, member.id)

    expect((await call(app, viewerToken, 'GET', BASE)).status).toBe(200)
    expect((await call(app, viewerToken, 'GET', `${BASE}/${lead.id}`)).status).toBe(200)
    for (const [method, json, permission] of [
      ['PATCH', { status: 'x' }, 'leads.write'],
      ['DELETE', undefined, 'leads.delete'],
    ] as const) {
      const response = await call(app, viewerToken, method, `${BASE}/${lead.id}`, json)
      expect(response.status).toBe(403)
      expectJsonHeaders(response)
      expect(await response.json()).toMatchObject({
        error: 'permission_denied',
        required_permission: permission,
      })
    }
    const patched = await call(app, memberToken, 'PATCH', `${BASE}/${lead.id}`, { status: 'called' })
    expect(patched.status).toBe(200)
    expect((await patched.json()).status).toBe('called')
    expect((await call(app, memberToken, 'DELETE', `${BASE}/${lead.id}`)).status).toBe(204)
  })

  test('a PAT scoped to leads.read reads but cannot edit; 401 without a credential', async () => {
    const { app, ctx, user, organization } = await setup()
    const lead = await createLead(ctx, organization.id)
    const pat = await createPat(ctx, user, { scopes: ['leads.read'] })
    const read = await app.handle(
      request('GET', `${BASE}/${lead.id}`, { headers: { 'x-api-key': pat.token } }),
    )
    expect(read.status).toBe(200)
    const write = await app.handle(
      request('PATCH', `${BASE}/${lead.id}`, { headers: { 'x-api-key': pat.token }, json: { status: 'x' } }),
    )
    expect(write.status).toBe(403)
    expect((await write.json()).required_permission).toBe('leads.write')
    for (const [method, path] of [
      ['GET', BASE],
      ['GET', `${BASE}/${lead.id}`],
      ['PATCH', `${BASE}/${lead.id}`],
      ['DELETE', `${BASE}/${lead.id}`],
    ] as const) {
      const response = await call(app, undefined, method, path, method === 'PATCH' ? {} : undefined)
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="api"')
      expect((await response.json()).error).toBe('unauthorized')
    }
  })
})

// 401 (missing, malformed, unknown credentials) and 403 (permission) on every route, on a real lead.
// No plan feature: leads are readable and editable on every plan.
type RouteFixture = Parameters<Parameters<typeof runCommonRouteTests>[0]['path']>[0]
const leadPath = async (fixture: RouteFixture) =>
  `${BASE}/${(await createLead(fixture.ctx, fixture.organizationId)).id}`
const protectedRoutes: Array<
  [string, string, (fixture: RouteFixture) => string | Promise<string>, unknown, string]
> = [
  ['GET', BASE, () => BASE, undefined, 'leads.read'],
  ['GET', `${BASE}/{id}`, leadPath, undefined, 'leads.read'],
  ['PATCH', `${BASE}/{id}`, leadPath, { status: 'x' }, 'leads.write'],
  ['DELETE', `${BASE}/{id}`, leadPath, undefined, 'leads.delete'],
]
for (const [method, name, path, body, permission] of protectedRoutes) {
  runCommonRouteTests({
    name: `${method} ${name}`,
    method,
    path,
    body,
    permission: permission as 'leads.read' | 'leads.write' | 'leads.delete',
  })
}

test('the OpenAPI document describes every leads route with its tag and statuses', async () => {
  const { app } = await makeTestApp()
  const spec = await (await app.handle(request('GET', '/swagger/json'))).json()
  const operations: Array<[string, string, string[]]> = [
    ['/api/v2/leads', 'get', ['200', '400', '401', '403', '429']],
    ['/api/v2/leads/{id}', 'get', ['200', '401', '403', '404']],
    ['/api/v2/leads/{id}', 'patch', ['200', '400', '401', '403', '404', '409']],
    ['/api/v2/leads/{id}', 'delete', ['204', '401', '403', '404']],
  ]
  for (const [path, method, statuses] of operations) {
    const operation = spec.paths[path]?.[method]
    expect({ path, method, tags: operation?.tags }).toEqual({ path, method, tags: ['Leads'] })
    expect(operation.summary.length).toBeGreaterThan(0)
    for (const status of statuses) expect(operation.responses[status]).toBeDefined()
  }
  const query = spec.paths['/api/v2/leads'].get.parameters.map(
    (parameter: { name: string }) => parameter.name,
  )
  expect(query).toEqual(expect.arrayContaining(['limit', 'cursor', 'source_id', 'q', 'created_after']))
})
