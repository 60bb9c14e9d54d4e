import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { users } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import {
  INVALID_CREDENTIAL_MESSAGE,
  SESSION_ABSOLUTE_MS,
  SESSION_IDLE_MS,
} from '../../src/modules/auth/credentials'
import { expectError, expectUnauthorized, runCommonRouteTests } from '../helpers/common-route-tests'
import { createPat, createSignedInUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

const PASSWORD = 'correct horse battery staple'
const DAY_MS = 24 * 3600 * 1000

function uniqueEmail(tag = 'user') {
  return `${tag}-${newId()}@example.com`
}

function signupBody(overrides: Record<string, unknown> = {}) {
  return { email: uniqueEmail(), password: PASSWORD, organization_name: 'Acme Ltd', ...overrides }
}

// Opening and migrating the shared database (PGlite: several seconds) is not any one test's time.
beforeAll(() => testDatabase(), 60_000)

describe('POST /api/auth/signup', () => {
  test('201: organization on the default plan, owner, session token that works at once', async () => {
    const clock = new FakeClock()
    const { app } = await makeTestApp({ clock })
    const email = uniqueEmail('Signup')
    const response = await app.handle(
      request('POST', '/api/auth/signup', { json: signupBody({ email: email.toUpperCase() }) }),
    )
    expect(response.status).toBe(201)
    const body = await response.json()
    expect(body.token).toMatch(/^fl_sess_[0-9A-Za-z]{38}$/)
    expect(body.user).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: email.toLowerCase(),
      role: 'owner',
      organization_id: body.organization.id,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    })
    expect(body.organization).toMatchObject({ name: 'Acme Ltd', plan: 'pro', features: ['integrations'] })
    expect(body.idle_timeout_seconds).toBe(SESSION_IDLE_MS / 1000)
    expect(body.user.created_at).toBe(new Date(clock.now()).toISOString())
    expect(body.expires_at).toBe(new Date(clock.now() + SESSION_ABSOLUTE_MS).toISOString())

    const me = await app.handle(request('GET', '/api/auth/me', { token: body.token }))
    expect(me.status).toBe(200)
    expect((await me.json()).user.id).toBe(body.user.id)
  })

  test('the plan of new organizations comes from DEFAULT_PLAN', async () => {
    const { app } = await makeTestApp({ env: { DEFAULT_PLAN: 'free' } })
    const response = await app.handle(request('POST', '/api/auth/signup', { json: signupBody() }))
    expect(response.status).toBe(201)
    expect((await response.json()).organization).toMatchObject({ plan: 'free', features: [] })
  })

  test('409 email_taken for an e-mail that has an account, whatever its case', async () => {
    const { app } = await makeTestApp()
    const email = uniqueEmail()
    expect(
      (await app.handle(request('POST', '/api/auth/signup', { json: signupBody({ email }) }))).status,
    ).toBe(201)
    const again = await app.handle(
      request('POST', '/api/auth/signup', { json: signupBody({ email: email.toUpperCase() }) }),
    )
    await expectError(again, 409, 'email_taken')
  })

  test('400 validation_failed for a short password, a bad e-mail, a missing name', async () => {
    const { app } = await makeTestApp()
    for (const [json, path] of [
      [signupBody({ password: 'short77' }), '/password'],
      [signupBody({ email: 'not-an-email' }), '/email'],
      [{ email: uniqueEmail(), password: PASSWORD }, '/organization_name'],
    ] as const) {
      const body = await expectError(
        await app.handle(request('POST', '/api/auth/signup', { json })),
        400,
        'validation_failed',
      )
      expect((body.details as Array<{ path: string }>).map((detail) => detail.path)).toContain(path)
    }
  })

  test('403 signup_disabled when SIGNUP_ENABLED=false', async () => {
    const { app } = await makeTestApp({ env: { SIGNUP_ENABLED: 'false' } })
    const response = await app.handle(request('POST', '/api/auth/signup', { json: signupBody() }))
    await expectError(response, 403, 'signup_disabled')
  })

  test('rate-limited to 5 per minute per client IP; other IPs are not affected', async () => {
    const clock = new FakeClock()
    const { app } = await makeTestApp({ clock })
    const from = (ip: string) => ({ 'x-forwarded-for': ip })
    // Invalid bodies still count: the limit is on attempts, before validation.
    for (let index = 0; index < 5; index++) {
      const response = await app.handle(
        request('POST', '/api/auth/signup', { json: {}, headers: from('203.0.113.7') }),
      )
      expect(response.status).toBe(400)
      expect(response.headers.get('x-ratelimit-limit')).toBe('5')
    }
    const refused = await app.handle(
      request('POST', '/api/auth/signup', { json: signupBody(), headers: from('203.0.113.7') }),
    )
    const body = await expectError(refused, 429, 'rate_limited')
    expect(body).toMatchObject({ limit: 5, remaining: 0, retry_after: 60 })
    expect(refused.headers.get('retry-after')).toBe('60')
    const other = await app.handle(
      request('POST', '/api/auth/signup', { json: signupBody(), headers: from('203.0.113.8') }),
    )
    expect(other.status).toBe(201)
    clock.advance(60_001)
    const later = await app.handle(
      request('POST', '/api/auth/signup', { json: signupBody(), headers: from('203.0.113.7') }),
    )
    expect(later.status).toBe(201)
  })
})

describe('POST /api/auth/login', () => {
  test('200 with a new session for the right password; the e-mail is case-insensitive', async () => {
    const { app } = await makeTestApp()
    const email = uniqueEmail()
    await app.handle(request('POST', '/api/auth/signup', { json: signupBody({ email }) }))
    const response = await app.handle(
      request('POST', '/api/auth/login', { json: { email: email.toUpperCase(), password: PASSWORD } }),
    )
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(body.token).toMatch(/^fl_sess_/)
    expect(body.user).toMatchObject({ email, role: 'owner' })
    expect(body.organization).toMatchObject({ plan: 'pro', features: ['integrations'] })
    expect((await app.handle(request('GET', '/api/auth/me', { token: body.token }))).status).toBe(200)
  })

  test('401 invalid_credentials alike for a wrong password and an unknown e-mail', async () => {
    const { app } = await makeTestApp()
    const email = uniqueEmail()
    await app.handle(request('POST', '/api/auth/signup', { json: signupBody({ email }) }))
    const wrongPassword = await app.handle(
      request('POST', '/api/auth/login', { json: { email, password: `${PASSWORD}!` } }),
    )
    const unknownEmail = await app.handle(
      request('POST', '/api/auth/login', { json: { email: uniqueEmail(), password: PASSWORD } }),
    )
    for (const response of [wrongPassword, unknownEmail]) {
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="api"')
      const body = await expectError(response, 401, 'invalid_credentials')
      expect(body.message).toBe('the e-mail address or the password is wrong')
    }
  })

  test('rate-limited to 10 per minute per client IP', async () => {
    const { app } = await makeTestApp()
    const attempt = () =>
      app.handle(
        request('POST', '/api/auth/login', {
          json: { email: uniqueEmail(), password: PASSWORD },
          headers: { 'x-forwarded-for': '198.51.100.20' },
        }),
      )
    for (let index = 0; index < 10; index++) expect((await attempt()).status).toBe(401)
    const refused = await attempt()
    await expectError(refused, 429, 'rate_limited')
    expect(refused.headers.get('x-ratelimit-limit')).toBe('10')
    expect(refused.headers.get('retry-after')).not.toBeNull()
  })
})

describe('sessions', () => {
  test('POST /api/auth/logout ends the presented session only: 204, then 401 invalid_token', async () => {
    const { app, ctx } = await makeTestApp()
    const { user, token } = await createSignedInUser(ctx)
    const login = await app.handle(
      request('POST', '/api/auth/login', { json: { email: user.email, password: user.password } }),
    )
    const otherToken = (await login.json()).token
    const response = await app.handle(request('POST', '/api/auth/logout', { token }))
    expect(response.status).toBe(204)
    expect(await response.text()).toBe('')
    await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { token })), true)
    await expectUnauthorized(await app.handle(request('POST', '/api/auth/logout', { token })), true)
    expect((await app.handle(request('GET', '/api/auth/me', { token: otherToken }))).status).toBe(200)
  })

  test('logout with a PAT is 403 session_required and leaves the PAT working', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx)
    const { token } = await createPat(ctx, user)
    await expectError(
      await app.handle(request('POST', '/api/auth/logout', { token })),
      403,
      'session_required',
    )
    expect((await app.handle(request('GET', '/api/auth/me', { token }))).status).toBe(200)
  })

  test('a session ends after 7 days without use; use keeps it alive', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token } = await createSignedInUser(ctx)
    const me = () => app.handle(request('GET', '/api/auth/me', { token }))
    clock.advance(SESSION_IDLE_MS - 60_000)
    expect((await me()).status).toBe(200)
    clock.advance(SESSION_IDLE_MS - 60_000)
    expect((await me()).status).toBe(200)
    clock.advance(SESSION_IDLE_MS)
    const expired = await me()
    const body = await expectUnauthorized(expired, true)
    expect(body.message).toBe(INVALID_CREDENTIAL_MESSAGE)
  })

  test('a session ends 30 days after log-in even when used every day', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token } = await createSignedInUser(ctx)
    for (let day = 1; day < 30; day++) {
      clock.advance(DAY_MS)
      expect((await app.handle(request('GET', '/api/auth/me', { token }))).status).toBe(200)
    }
    clock.advance(DAY_MS)
    await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { token })), true)
  })
})

describe('GET /api/auth/me', () => {
  test('session: user, organization with plan and features, the role permissions', async () => {
    const { app, ctx } = await makeTestApp()
    const { user, organization, token } = await createSignedInUser(ctx, { role: 'member' })
    const response = await app.handle(request('GET', '/api/auth/me', { token }))
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(body).toEqual({
      user: {
        id: user.id,
        email: user.email,
        role: 'member',
        organization_id: organization.id,
        created_at: user.createdAt.toISOString(),
      },
      organization: {
        id: organization.id,
        name: organization.name,
        plan: 'pro',
        features: ['integrations'],
        created_at: organization.createdAt.toISOString(),
      },
      permissions: ['leads.read', 'leads.write', 'leads.delete'],
      auth: { kind: 'session', credential_id: expect.any(String), scopes: null },
    })
  })

  test('PAT in X-API-Key: permissions are the role intersected with the scopes', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx, { role: 'member' })
    const { token, tokenId } = await createPat(ctx, user, { scopes: ['leads.read', 'settings.*'] })
    const response = await app.handle(request('GET', '/api/auth/me', { headers: { 'x-api-key': token } }))
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      permissions: ['leads.read'],
      auth: { kind: 'pat', credential_id: tokenId, scopes: ['leads.read', 'settings.*'] },
    })
  })

  test('a role change applies to the next request of an existing session', async () => {
    const { app, ctx } = await makeTestApp()
    const { user, token } = await createSignedInUser(ctx, { role: 'admin' })
    const before = await (await app.handle(request('GET', '/api/auth/me', { token }))).json()
    expect(before.permissions).toContain('settings.members')
    await ctx.db.update(users).set({ role: 'viewer' }).where(eq(users.id, user.id))
    const after = await (await app.handle(request('GET', '/api/auth/me', { token }))).json()
    expect(after.permissions).toEqual(['leads.read'])
    expect(after.user.role).toBe('viewer')
  })
})

runCommonRouteTests({ name: 'GET /api/auth/me', method: 'GET', path: () => '/api/auth/me' })
runCommonRouteTests({ name: 'POST /api/auth/logout', method: 'POST', path: () => '/api/auth/logout' })
