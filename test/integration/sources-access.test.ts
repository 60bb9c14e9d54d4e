import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookSources } from '../../src/db/schema'
import { digestSecret } from '../../src/lib/secrets'
import { runCommonRouteTests } from '../helpers/common-route-tests'
import { createPat, createSession, createSignedInUser, createSource, createUser } from '../helpers/factories'
import { BASE, createViaApi, expectJsonHeaders, setup } from '../helpers/sources'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// Who may reach which source: organizations, roles, scopes, plans; the OpenAPI description of the routes.

describe('isolation and access', () => {
  test('another organization’s source is 404 on every route and stays unchanged', async () => {
    const { app, ctx, token } = await setup()
    const other = await createSignedInUser(ctx)
    const { source, apiKey } = await createSource(ctx, other.organization.id, { name: 'Theirs' })
    const attempts: Array<[string, string, unknown]> = [
      ['GET', `${BASE}/${source.id}`, undefined],
      ['PATCH', `${BASE}/${source.id}`, { enabled: false }],
      ['POST', `${BASE}/${source.id}/regenerate-key`, {}],
      ['DELETE', `${BASE}/${source.id}`, undefined],
    ]
    for (const [method, path, json] of attempts) {
      const response = await call(app, token, method, path, json)
      expect({ method, status: response.status }).toEqual({ method, status: 404 })
      expectJsonHeaders(response)
      expect(await response.json()).toEqual({
        error: 'not_found',
        message: 'source not found',
        request_id: response.headers.get('x-request-id'),
      })
    }
    const [row] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id))
    expect(row).toMatchObject({ name: 'Theirs', enabled: true, keyDigest: digestSecret(apiKey) })
  })

  test('an unknown id is 404 (a malformed one is 400: malformed-ids.test.ts)', async () => {
    const { app, token } = await setup()
    for (const id of ['01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e']) {
      for (const [method, suffix, json] of [
        ['GET', '', undefined],
        ['PATCH', '', { name: 'x' }],
        ['DELETE', '', undefined],
        ['POST', '/regenerate-key', {}],
      ] as const) {
        const response = await call(app, token, method, `${BASE}/${id}${suffix}`, json)
        expect({ id, method, status: response.status }).toEqual({ id, method, status: 404 })
        expect((await response.json()).error).toBe('not_found')
      }
    }
  })

  const routes: Array<[string, string, unknown]> = [
    ['GET', BASE, undefined],
    ['POST', BASE, { name: 'x' }],
    ['GET', `${BASE}/01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e`, undefined],
    ['PATCH', `${BASE}/01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e`, { name: 'x' }],
    ['DELETE', `${BASE}/01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e`, undefined],
    ['POST', `${BASE}/01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e/regenerate-key`, {}],
  ]

  test('403 without settings.integrations (member, viewer, narrow PAT) or without the plan feature', async () => {
    const { app, ctx, organization } = await setup()
    const member = await createUser(ctx, organization.id, { role: 'member' })
    const memberToken = await createSession(ctx, member.id)
    const viewer = await createUser(ctx, organization.id, { role: 'viewer' })
    const viewerToken = await createSession(ctx, viewer.id)
    const admin = await createUser(ctx, organization.id, { role: 'admin' })
    const narrowPat = await createPat(ctx, admin, { scopes: ['leads.*'] })
    const free = await createSignedInUser(ctx, { plan: 'free' })
    for (const [method, path, json] of routes) {
      for (const token of [memberToken, viewerToken, narrowPat.token]) {
        const response = await call(app, token, method, path, json)
        expect({ method, path, status: response.status }).toEqual({ method, path, status: 403 })
        expect(await response.json()).toMatchObject({
          error: 'permission_denied',
          required_permission: 'settings.integrations',
        })
      }
      const response = await call(app, free.token, method, path, json)
      // Finding a source and ending or rotating its key stay open on free (own-credentials.test.ts):
      // there the unknown id is a 404; creating and editing need the plan feature.
      if (method === 'POST' && path === BASE) expect(response.status).toBe(403)
      else if (method === 'PATCH') expect(response.status).toBe(403)
      else {
        expect({ method, path, status: response.status }).toEqual({
          method,
          path,
          status: method === 'GET' && path === BASE ? 200 : 404,
        })
        continue
      }
      expect(await response.json()).toMatchObject({
        error: 'plan_feature_required',
        required_feature: 'integrations',
      })
    }
  })

  test('an admin, and a PAT scoped to settings.integrations, may manage sources', async () => {
    const { app, ctx, organization } = await setup()
    const admin = await createUser(ctx, organization.id, { role: 'admin' })
    const adminToken = await createSession(ctx, admin.id)
    const pat = await createPat(ctx, admin, { scopes: ['settings.integrations'] })
    const created = await createViaApi(app, adminToken)
    const viaPat = await app.handle(
      request('GET', `${BASE}/${created.id}`, { headers: { 'x-api-key': pat.token } }),
    )
    expect(viaPat.status).toBe(200)
    expect((await viaPat.json()).id).toBe(created.id)
  })
})

// 401 (missing, malformed, unknown credentials) and 403 (role, plan) on every route, on a real source.
type RouteFixture = Parameters<Parameters<typeof runCommonRouteTests>[0]['path']>[0]
const sourcePath =
  (suffix = '') =>
  async (fixture: RouteFixture) =>
    `${BASE}/${(await createSource(fixture.ctx, fixture.organizationId)).source.id}${suffix}`
const protectedRoutes: Array<[string, string, (fixture: RouteFixture) => string | Promise<string>, unknown]> =
  [
    ['GET', BASE, () => BASE, undefined],
    ['POST', BASE, () => BASE, { name: 'x' }],
    ['GET', `${BASE}/{id}`, sourcePath(), undefined],
    ['PATCH', `${BASE}/{id}`, sourcePath(), { name: 'x' }],
    ['DELETE', `${BASE}/{id}`, sourcePath(), undefined],
    ['POST', `${BASE}/{id}/regenerate-key`, sourcePath('/regenerate-key'), {}],
  ]
// Finding a source and ending or rotating its key are open on every plan (own-credentials.test.ts).
const OPEN_ON_EVERY_PLAN = new Set([
  `GET ${BASE}`,
  `GET ${BASE}/{id}`,
  `DELETE ${BASE}/{id}`,
  `POST ${BASE}/{id}/regenerate-key`,
])
for (const [method, name, path, body] of protectedRoutes) {
  runCommonRouteTests({
    name: `${method} ${name}`,
    method,
    path,
    body,
    permission: 'settings.integrations',
    ...(OPEN_ON_EVERY_PLAN.has(`${method} ${name}`) ? {} : { feature: 'integrations' as const }),
  })
}

test('the OpenAPI document describes every sources route with its tag, summary and error statuses', async () => {
  const { app } = await makeTestApp()
  const spec = await (await app.handle(request('GET', '/swagger/json'))).json()
  const operations: Array<[string, string, string[]]> = [
    ['/api/webhook/sources', 'get', ['200', '400', '401', '403', '429']],
    ['/api/webhook/sources', 'post', ['201', '400', '401', '403', '429']],
    ['/api/webhook/sources/{id}', 'get', ['200', '401', '403', '404']],
    ['/api/webhook/sources/{id}', 'patch', ['200', '400', '401', '403', '404']],
    ['/api/webhook/sources/{id}', 'delete', ['204', '401', '403', '404']],
    ['/api/webhook/sources/{id}/regenerate-key', 'post', ['200', '400', '401', '403', '404', '429']],
  ]
  for (const [path, method, statuses] of operations) {
    const operation = spec.paths[path]?.[method]
    expect({ path, method, tags: operation?.tags }).toEqual({ path, method, tags: ['Sources'] })
    expect(operation.summary.length).toBeGreaterThan(0)
    expect(operation.description).toContain('settings.integrations')
    expect(operation.security).toEqual([{ bearerAuth: [] }, { apiKeyAuth: [] }])
    for (const status of statuses) expect(operation.responses[status]).toBeDefined()
  }
  // Named schemas are references into components.schemas.
  const named = (schema: { $ref?: string }) =>
    schema.$ref ? spec.components.schemas[schema.$ref.split('/').pop()!] : schema
  const created = named(
    spec.paths['/api/webhook/sources'].post.responses['201'].content['application/json'].schema,
  )
  expect(created.required).toEqual(expect.arrayContaining(['api_key', 'webhook_url']))
  const listed = named(
    spec.paths['/api/webhook/sources'].get.responses['200'].content['application/json'].schema,
  )
  expect(Object.keys(named(listed.properties.data.items).properties)).not.toContain('api_key')
})
