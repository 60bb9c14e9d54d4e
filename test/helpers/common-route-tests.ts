import { describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { personalAccessTokens } from '../../src/db/schema'
import {
  effectivePermissions,
  type Feature,
  type Permission,
  ROLES,
  type Role,
} from '../../src/lib/permissions'
import { generateSecret } from '../../src/lib/secrets'
import { INVALID_CREDENTIAL_MESSAGE } from '../../src/modules/auth/credentials'
import type { Services } from '../../src/services'
import { createOrganization, createPat, createSession, createUser } from './factories'
import { makeTestApp, request } from './test-app'

type TestApp = Awaited<ReturnType<typeof makeTestApp>>

/** Who the request is made as: resources a path or body needs are created in this organization. */
export interface RouteFixture {
  ctx: AppContext
  /** The app's services (makeTestApp), for path builders that create through a service. */
  services: Services
  organizationId: string
  userId: string
}

export interface ProtectedRoute {
  /** Label of the describe block, e.g. `DELETE /api/pat/{token_id}`; defaults to the path builder's source. */
  name?: string
  method: string
  /** Builds the path; may create what the path names (a source, a member) in the fixture's org. */
  path: (fixture: RouteFixture) => string | Promise<string>
  /** A body that would pass validation, so the auth answer is what the test sees. */
  body?: unknown | ((fixture: RouteFixture) => unknown | Promise<unknown>)
  /** The permission the route requires (DESIGN §4); omit for routes any signed-in user may call. */
  permission?: Permission
  /** The plan feature the route requires; omit for routes open on every plan. */
  feature?: Feature
  /** Builds the app; defaults to makeTestApp(). */
  makeApp?: () => Promise<TestApp>
}

/** Asserts an error response: status, the DESIGN §2 body, and the request id echoed. */
export async function expectError(response: Response, status: number, code: string) {
  const body = await response.json()
  expect({ status: response.status, error: body.error }).toEqual({ status, error: code })
  expect(typeof body.message).toBe('string')
  expect(body.request_id).toBe(response.headers.get('x-request-id'))
  return body as Record<string, unknown>
}

/** 401 with `WWW-Authenticate: Bearer realm="api"`, plus `error="invalid_token"` when a token was sent. */
export async function expectUnauthorized(response: Response, tokenSent: boolean) {
  expect(response.headers.get('www-authenticate')).toBe(
    tokenSent ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"',
  )
  return expectError(response, 401, tokenSent ? 'invalid_token' : 'unauthorized')
}

/** The lowest role without the permission, if any role lacks it. */
function roleLacking(permission: Permission): Role | undefined {
  return [...ROLES].reverse().find((role) => !effectivePermissions(role, null).has(permission))
}

async function signedIn(
  { ctx, services }: { ctx: AppContext; services: Services },
  options: { role: Role; plan: string },
) {
  const organization = await createOrganization(ctx, { plan: options.plan })
  const user = await createUser(ctx, organization.id, { role: options.role })
  const token = await createSession(ctx, user.id)
  const fixture: RouteFixture = { ctx, services, organizationId: organization.id, userId: user.id }
  return { organization, user, token, fixture }
}

async function send(app: TestApp['app'], route: ProtectedRoute, fixture: RouteFixture, headers = {}) {
  const path = await route.path(fixture)
  const body = typeof route.body === 'function' ? await route.body(fixture) : route.body
  return app.handle(request(route.method, path, { json: body, headers }))
}

/**
 * The checks every protected route shares (unkey's runCommonRouteTests): 401 without a credential,
 * 401 `invalid_token` for malformed and unknown ones (both headers), 403 `permission_denied`
 * without the permission, 403 `plan_feature_required` on the free plan. Call it at the top level
 * of a test file:
 *
 *   runCommonRouteTests({ name: 'GET /api/pat', method: 'GET', path: () => '/api/pat', permission: 'settings.integrations', feature: 'integrations' })
 */
export function runCommonRouteTests(route: ProtectedRoute) {
  const makeApp = route.makeApp ?? (() => makeTestApp())
  const label = route.name ?? `${route.method} ${route.path.toString().replace(/\s+/g, ' ').slice(0, 80)}`

  describe(`common route tests: ${label}`, () => {
    test('401 without a credential, with WWW-Authenticate: Bearer realm="api"', async () => {
      const made = await makeApp()
      const { app } = made
      const { fixture } = await signedIn(made, { role: 'owner', plan: 'pro' })
      const response = await send(app, route, fixture)
      await expectUnauthorized(response, false)
      expect(response.headers.get('x-ratelimit-limit')).not.toBeNull()
    })

    test('401 invalid_token for malformed and unknown tokens, in either header', async () => {
      const made = await makeApp()
      const { app } = made
      const { fixture, token } = await signedIn(made, { role: 'owner', plan: 'pro' })
      const wrongChecksum = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`
      const attempts: Array<Record<string, string>> = [
        { authorization: 'Bearer not-a-token' },
        { authorization: `Basic ${btoa('user:password')}` },
        { authorization: `Bearer ${wrongChecksum}` },
        { authorization: `Bearer ${generateSecret('session')}` },
        { authorization: `Bearer ${generateSecret('pat')}` },
        { 'x-api-key': generateSecret('pat') },
        { 'x-api-key': generateSecret('source_key') },
      ]
      for (const headers of attempts) await expectUnauthorized(await send(app, route, fixture, headers), true)
    })

    test('401 for a real token sent the wrong way: no Bearer scheme, another scheme, a session in X-API-Key', async () => {
      const made = await makeApp()
      const { app, ctx } = made
      const { fixture, token, user } = await signedIn(made, { role: 'owner', plan: 'pro' })
      const pat = (await createPat(ctx, user)).token
      const attempts: Array<Record<string, string>> = [
        { authorization: token },
        { authorization: pat },
        { authorization: `Token ${token}` },
        { authorization: `Basic ${pat}` },
        { authorization: `Bearer${token}` },
        { authorization: `Bearer ${token} ${token}` },
        { 'x-api-key': token },
        { 'x-api-key': `Bearer ${pat}` },
      ]
      for (const headers of attempts) {
        const body = await expectUnauthorized(await send(app, route, fixture, headers), true)
        expect(body.message).toBe(INVALID_CREDENTIAL_MESSAGE)
      }
      // The scheme is case-insensitive (RFC 9110 §11.1); a PAT is accepted in X-API-Key.
      for (const headers of [
        { authorization: `bearer ${token}` },
        { authorization: `BEARER \t${pat} ` },
        { 'x-api-key': pat },
      ]) {
        expect((await send(app, route, fixture, headers)).status).not.toBe(401)
      }
    })

    test('401: one message for every refused credential (malformed, unknown, expired, revoked)', async () => {
      const made = await makeApp()
      const { app, ctx } = made
      const { fixture, user } = await signedIn(made, { role: 'owner', plan: 'pro' })
      const expired = await createPat(ctx, user, { expiresAt: new Date(ctx.clock.now() - 1000) })
      const revoked = await createPat(ctx, user)
      await ctx.db
        .update(personalAccessTokens)
        .set({ revokedAt: new Date(ctx.clock.now()) })
        .where(eq(personalAccessTokens.id, revoked.tokenId))
      const tokens = ['fl_pat_nonsense', generateSecret('pat'), expired.token, revoked.token]
      const messages = new Set<unknown>()
      for (const token of tokens) {
        for (const headers of [{ authorization: `Bearer ${token}` }, { 'x-api-key': token }]) {
          messages.add((await expectUnauthorized(await send(app, route, fixture, headers), true)).message)
        }
      }
      expect([...messages]).toEqual([INVALID_CREDENTIAL_MESSAGE])
    })

    if (route.permission) {
      const permission = route.permission
      const role = roleLacking(permission)
      const who = role ? `a ${role}` : `an owner's PAT scoped without "${permission}"`
      test(`403 permission_denied for ${who}`, async () => {
        const made = await makeApp()
        const { app, ctx } = made
        const actor = await signedIn(made, { role: role ?? 'owner', plan: 'pro' })
        let token = actor.token
        if (!role) {
          const otherScope = permission === 'leads.read' ? 'settings.*' : 'leads.read'
          token = (await createPat(ctx, actor.user, { scopes: [otherScope] })).token
        }
        const response = await send(app, route, actor.fixture, { authorization: `Bearer ${token}` })
        const body = await expectError(response, 403, 'permission_denied')
        expect(body.required_permission).toBe(permission)
      })
    }

    if (route.feature) {
      const feature = route.feature
      test(`403 plan_feature_required for an owner on the free plan`, async () => {
        const made = await makeApp()
        const { app } = made
        const actor = await signedIn(made, { role: 'owner', plan: 'free' })
        const response = await send(app, route, actor.fixture, { authorization: `Bearer ${actor.token}` })
        const body = await expectError(response, 403, 'plan_feature_required')
        expect(body).toMatchObject({ required_feature: feature, plan: 'free' })
      })
    }
  })
}
