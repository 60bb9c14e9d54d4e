import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { leads, users, webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { SESSION_COOKIE, SESSION_IDLE_MS } from '../../src/modules/auth/credentials'
import { csrfTokenIn, DashboardClient, SITE } from '../helpers/dashboard'
import { organizationWithData, PAGES } from '../helpers/dashboard-pages'
import { createLead, createSession, createSignedInUser, createSource, createUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const PASSWORD = 'correct horse battery staple'

function attributesOf(setCookie: string | null): Map<string, string> {
  const [, ...parts] = (setCookie ?? '').split(';')
  return new Map(
    parts.map((part) => {
      const [name, value = ''] = part.trim().split('=')
      return [name!.toLowerCase(), value]
    }),
  )
}

async function signUp(client: DashboardClient, email = `owner-${crypto.randomUUID()}@example.com`) {
  const response = await client.submit('/app/sign-up', '/app/sign-up', {
    organization_name: 'Acme',
    email,
    password: PASSWORD,
  })
  return { response, email }
}

describe('entry points', () => {
  test('GET / redirects to /app; /app sends a visitor without a session to sign in', async () => {
    const { app } = await makeTestApp()
    const root = await app.handle(request('GET', '/'))
    expect({ status: root.status, location: root.headers.get('location') }).toEqual({
      status: 303,
      location: '/app',
    })
    const home = await app.handle(request('GET', '/app'))
    expect({ status: home.status, location: home.headers.get('location') }).toEqual({
      status: 303,
      location: '/app/sign-in',
    })
  })

  test('every signed-in page sends a visitor without a session to sign in, coming back afterwards', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    const paths = [
      '/app/sources',
      `/app/sources/${source.id}`,
      `/app/sources/${source.id}/logs`,
      `/app/sources/${source.id}/logs/${crypto.randomUUID()}`,
      '/app/leads',
      '/app/leads/export.csv',
      '/app/tokens',
      '/app/members',
      `/app/sources/${source.id}/delete`,
      `/app/leads/${crypto.randomUUID()}`,
      `/app/leads/${crypto.randomUUID()}/delete`,
      `/app/members/${owner.user.id}/remove`,
    ]
    for (const path of paths) {
      const response = await app.handle(request('GET', path))
      expect({ path, status: response.status, location: response.headers.get('location') }).toEqual({
        path,
        status: 303,
        location: `/app/sign-in?next=${encodeURIComponent(path)}`,
      })
      expect(await response.text()).toBe('')
    }
  })

  test('the sign-in and sign-up pages are HTML with a strict CSP and a labelled form', async () => {
    const { app } = await makeTestApp()
    for (const path of ['/app/sign-in', '/app/sign-up']) {
      const response = await app.handle(request('GET', path))
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(response.headers.get('content-security-policy')).toContain("script-src 'self'")
      expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
      expect(response.headers.get('x-frame-options')).toBe('DENY')
      expect(response.headers.get('cache-control')).toBe('no-store')
      const html = await response.text()
      expect(html).toStartWith('<!doctype html>')
      expect(html).toContain('<label for="email">')
      expect(html).toContain('<label for="password">')
      expect(csrfTokenIn(html)).toBe(attributesOf(`x; ${response.headers.get('set-cookie')}`).get('lc_csrf')!)
    }
  })
})

// Bodies that pass each API route's schema, so the answer is about the credential alone.
const VALID_BODIES: Record<string, unknown> = {
  'POST /api/webhook/sources': { name: 'x' },
  'PATCH /api/webhook/sources/:id': { name: 'x' },
  'POST /api/pat': { name: 'x' },
  'POST /api/v2/members': { email: 'x@example.com', password: PASSWORD, role: 'member' },
  'PATCH /api/v2/members/:user_id': { role: 'member' },
  'PATCH /api/v2/leads/:id': { status: 'x' },
  'POST /api/v2/webhook-endpoints': { url: 'https://hooks.example.com/lead-capture' },
  'PATCH /api/v2/webhook-endpoints/:id': { enabled: true },
  'POST /api/v2/webhook-endpoints/:id/recover': { since: '2026-01-01T00:00:00Z' },
}

describe('the session cookie', () => {
  test('sign-up sets an HttpOnly, SameSite=Strict cookie scoped to /app, without Secure over http', async () => {
    const { app } = await makeTestApp()
    const client = new DashboardClient(app)
    await client.get('/app/sign-up')
    const page = await client.get('/app/sign-up')
    const response = await client.send('POST', '/app/sign-up', {
      form: {
        _csrf: csrfTokenIn(await page.text()),
        organization_name: 'Acme',
        email: `a-${crypto.randomUUID()}@example.com`,
        password: PASSWORD,
      },
      headers: { origin: SITE },
    })
    expect(response.status).toBe(303)
    expect(response.headers.get('location')).toBe('/app')
    const setCookie = response.headers.get('set-cookie')!
    expect(setCookie).toStartWith(`${SESSION_COOKIE}=fl_sess_`)
    const attributes = attributesOf(setCookie)
    expect(attributes.has('httponly')).toBe(true)
    expect(attributes.get('samesite')).toBe('Strict')
    expect(attributes.get('path')).toBe('/app')
    expect(attributes.get('max-age')).toBe(String(30 * 24 * 3600))
    expect(attributes.has('secure')).toBe(false)
    expect((await client.get('/app')).headers.get('location')).toBe('/app/sources')
  })

  test('Secure when PUBLIC_BASE_URL is https', async () => {
    const { app } = await makeTestApp({ env: { PUBLIC_BASE_URL: 'https://leads.example.com' } })
    const client = new DashboardClient(app)
    const page = await client.get('/app/sign-up')
    expect(attributesOf(page.headers.get('set-cookie')).has('secure')).toBe(true)
    const response = await client.send('POST', '/app/sign-up', {
      form: {
        _csrf: csrfTokenIn(await page.text()),
        organization_name: 'Acme',
        email: `a-${crypto.randomUUID()}@example.com`,
        password: PASSWORD,
      },
      headers: { origin: 'https://leads.example.com' },
    })
    expect(response.status).toBe(303)
    expect(attributesOf(response.headers.get('set-cookie')).has('secure')).toBe(true)
  })

  test('sign-in: a wrong password is the sign-in page again with the API message; the right one goes to next', async () => {
    const { app } = await makeTestApp()
    const { email } = await signUp(new DashboardClient(app))
    const client = new DashboardClient(app)
    const wrong = await client.submit('/app/sign-in', '/app/sign-in', { email, password: 'not the password' })
    expect(wrong.status).toBe(401)
    const html = await wrong.text()
    expect(html).toContain('the e-mail address or the password is wrong')
    expect(html).toContain('role="alert"')
    expect(client.cookies.has(SESSION_COOKIE)).toBe(false)
    const right = await client.submit('/app/sign-in', '/app/sign-in', {
      email,
      password: PASSWORD,
      next: '/app/leads',
    })
    expect({ status: right.status, location: right.headers.get('location') }).toEqual({
      status: 303,
      location: '/app/leads',
    })
    expect(client.cookies.get(SESSION_COOKIE)).toStartWith('fl_sess_')
    for (const next of ['https://evil.example/app', '//evil.example/app', '/api/v2/leads', '/app/../api']) {
      const other = new DashboardClient(app)
      const response = await other.submit('/app/sign-in', '/app/sign-in', { email, password: PASSWORD, next })
      expect({ next, location: response.headers.get('location') }).toEqual({ next, location: '/app' })
    }
  })

  test('sign-up errors come back on the form: a common password, a taken e-mail, sign-up disabled', async () => {
    const { app } = await makeTestApp()
    const { email } = await signUp(new DashboardClient(app))
    const client = new DashboardClient(app)
    const weak = await client.submit('/app/sign-up', '/app/sign-up', {
      organization_name: 'Acme',
      email: `b-${crypto.randomUUID()}@example.com`,
      password: 'password',
    })
    expect(weak.status).toBe(400)
    expect(await weak.text()).toContain('/password')
    const taken = await client.submit('/app/sign-up', '/app/sign-up', {
      organization_name: 'Acme',
      email,
      password: PASSWORD,
    })
    expect(taken.status).toBe(409)
    const closed = await makeTestApp({ env: { SIGNUP_ENABLED: 'false' } })
    const refused = await new DashboardClient(closed.app).submit('/app/sign-in', '/app/sign-up', {
      organization_name: 'Acme',
      email: `c-${crypto.randomUUID()}@example.com`,
      password: PASSWORD,
    })
    expect(refused.status).toBe(403)
    expect(await refused.text()).toContain('sign-up is disabled')
  })

  test('the cookie is never accepted on /api: every API route answers 401 to the cookie alone', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    const routes = app.routes.filter(
      (route) =>
        route.path.startsWith('/api/') &&
        !route.path.startsWith('/api/webhook/lead/') &&
        route.path !== '/api/webhook/tracker.js' &&
        !['/api/auth/login', '/api/auth/signup'].includes(route.path),
    )
    expect(routes.length).toBeGreaterThan(15)
    for (const route of routes) {
      const path = route.path.replace(':id', source.id).replace(/:[a-z_]+/g, () => crypto.randomUUID())
      const response = await app.handle(
        request(route.method, path, {
          headers: { cookie: `${SESSION_COOKIE}=${owner.token}`, origin: SITE },
          json: VALID_BODIES[`${route.method} ${route.path}`] ?? (route.method === 'GET' ? undefined : {}),
        }),
      )
      expect({ route: `${route.method} ${route.path}`, status: response.status }).toEqual({
        route: `${route.method} ${route.path}`,
        status: 401,
      })
      expect((await response.json()).error).toBe('unauthorized')
    }
  })

  test('a PAT in the cookie is refused; a bearer header on /app is ignored', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { createPat } = await import('../helpers/factories')
    const pat = await createPat(ctx, owner.user)
    const withPat = await app.handle(
      request('GET', '/app/sources', { headers: { cookie: `${SESSION_COOKIE}=${pat.token}` } }),
    )
    expect(withPat.status).toBe(303)
    const withBearer = await app.handle(request('GET', '/app/sources', { token: owner.token }))
    expect(withBearer.status).toBe(303)
    expect(withBearer.headers.get('location')).toStartWith('/app/sign-in')
  })

  test('sign-out ends the session everywhere: the cookie and the same token as a bearer token', async () => {
    const { app } = await makeTestApp()
    const client = new DashboardClient(app)
    await signUp(client)
    const token = client.cookies.get(SESSION_COOKIE)!
    expect((await app.handle(request('GET', '/api/auth/me', { token }))).status).toBe(200)
    const out = await client.submit('/app/tokens', '/app/sign-out')
    expect({ status: out.status, location: out.headers.get('location') }).toEqual({
      status: 303,
      location: '/app/sign-in',
    })
    expect(attributesOf(out.headers.get('set-cookie')).get('max-age')).toBe('0')
    expect((await app.handle(request('GET', '/api/auth/me', { token }))).status).toBe(401)
    const replay = await app.handle(
      request('GET', '/app/sources', { headers: { cookie: `${SESSION_COOKIE}=${token}` } }),
    )
    expect(replay.status).toBe(303)
    // The stale cookie is cleared on the way to the sign-in page.
    expect(attributesOf(replay.headers.get('set-cookie')).get('max-age')).toBe('0')
  })

  test('the API session rules apply: an idle session expires', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1))
    const { app, ctx } = await makeTestApp({ clock })
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    expect((await client.get('/app/sources')).status).toBe(200)
    clock.advance(SESSION_IDLE_MS + 1000)
    const expired = await client.get('/app/sources')
    expect(expired.status).toBe(303)
    expect(expired.headers.get('location')).toBe('/app/sign-in?next=%2Fapp%2Fsources')
  })

  test('sign-in through the dashboard shares the API login limit (10 per minute per IP)', async () => {
    const { app } = await makeTestApp()
    const client = new DashboardClient(app)
    const page = await client.get('/app/sign-in')
    const token = csrfTokenIn(await page.text())
    const statuses: number[] = []
    for (let attempt = 0; attempt < 11; attempt++) {
      const response = await client.send('POST', '/app/sign-in', {
        form: { _csrf: token, email: 'nobody@example.com', password: 'wrong password' },
        headers: { origin: SITE, 'x-forwarded-for': '198.51.100.77' },
      })
      statuses.push(response.status)
    }
    expect(statuses).toEqual([...Array(10).fill(401), 429])
  })
})

describe('CSRF', () => {
  // Every state-changing dashboard route, with a form that would succeed with the right token.
  type Fixture = { sourceId: string; tokenId: string; leadId: string; memberId: string }
  const routes: Array<{ path: (fixture: Fixture) => string; form: Record<string, string> }> = [
    { path: () => '/app/sources', form: { name: 'Forged source' } },
    { path: ({ leadId }) => `/app/leads/${leadId}`, form: { email: 'forged@example.com' } },
    { path: ({ leadId }) => `/app/leads/${leadId}/delete`, form: {} },
    { path: ({ memberId }) => `/app/members/${memberId}/role`, form: { role: 'owner' } },
    { path: ({ memberId }) => `/app/members/${memberId}/remove`, form: {} },
    { path: ({ sourceId }) => `/app/sources/${sourceId}/delete`, form: {} },
    { path: ({ sourceId }) => `/app/sources/${sourceId}`, form: { name: 'Forged name' } },
    { path: ({ sourceId }) => `/app/sources/${sourceId}/regenerate-key`, form: { grace_seconds: '0' } },
    { path: () => '/app/tokens', form: { name: 'forged token' } },
    { path: ({ tokenId }) => `/app/tokens/${tokenId}/revoke`, form: {} },
    {
      path: () => '/app/members',
      form: { email: `forged-${crypto.randomUUID()}@example.com`, password: PASSWORD, role: 'owner' },
    },
    { path: () => '/app/sign-out', form: {} },
  ]

  async function setup() {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id, { name: 'Original' })
    const { createPat } = await import('../helpers/factories')
    const { tokenId } = await createPat(ctx, owner.user)
    const lead = await createLead(ctx, owner.organization.id, { email: 'original@example.com' })
    const member = await createUser(ctx, owner.organization.id, { role: 'viewer' })
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const token = csrfTokenIn(await (await client.get('/app/tokens')).text())
    const fixture = { sourceId: source.id, tokenId, leadId: lead.id, memberId: member.id }
    return { app, ctx, owner, source, client, token, fixture }
  }

  test('the table covers every state-changing dashboard route (sign-in and sign-up have their own test)', async () => {
    const { app } = await makeTestApp()
    const placeholders = { sourceId: ':', tokenId: ':', leadId: ':', memberId: ':' }
    const covered = new Set(routes.map((route) => route.path(placeholders)))
    const posts = (app.routes as Array<{ method: string; path: string }>)
      .filter((route) => route.method !== 'GET' && route.path.startsWith('/app'))
      .map((route) => `${route.method} ${route.path.replace(/:[a-z_]+/g, ':')}`)
      .filter((route) => !['POST /app/sign-in', 'POST /app/sign-up'].includes(route))
    expect(posts).toContain('POST /app/tokens/:/revoke')
    expect(posts.filter((route) => !covered.has(route.replace(/^POST /, '')))).toEqual([])
  })

  for (const route of routes) {
    test(`POST ${route.path({ sourceId: ':id', tokenId: ':token_id', leadId: ':lead_id', memberId: ':user_id' })}: refused cross-site, without Origin, without or with a wrong token`, async () => {
      const { ctx, source, client, token, fixture } = await setup()
      const attempts: Array<{ label: string; headers: Record<string, string>; csrf?: string }> = [
        { label: 'cross-site Origin', headers: { origin: 'https://evil.example' }, csrf: token },
        {
          label: 'cross-site Referer, no Origin',
          headers: { referer: 'https://evil.example/page' },
          csrf: token,
        },
        { label: 'Origin "null"', headers: { origin: 'null' }, csrf: token },
        { label: 'no Origin or Referer', headers: {}, csrf: token },
        { label: 'no token', headers: { origin: SITE } },
        { label: 'a wrong token', headers: { origin: SITE }, csrf: `${token.slice(0, -2)}xx` },
        {
          label: 'another session’s token',
          headers: { origin: SITE },
          csrf: csrfTokenIn(
            await (
              await (
                await DashboardClient.signedIn(client.app, ctx, (await createSignedInUser(ctx)).user.id)
              ).get('/app/tokens')
            ).text(),
          ),
        },
      ]
      for (const attempt of attempts) {
        const form = attempt.csrf ? { ...route.form, _csrf: attempt.csrf } : route.form
        const response = await client.send('POST', route.path(fixture), { form, headers: attempt.headers })
        expect({ attempt: attempt.label, status: response.status }).toEqual({
          attempt: attempt.label,
          status: 403,
        })
        expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      }
      // Nothing changed, and the session is still alive.
      const [row] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id))
      expect({ name: row!.name, keyHint: row!.keyHint }).toEqual({
        name: 'Original',
        keyHint: source.keyHint,
      })
      const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, fixture.leadId))
      expect(lead?.email).toBe('original@example.com')
      const [member] = await ctx.db.select().from(users).where(eq(users.id, fixture.memberId))
      expect(member?.role).toBe('viewer')
      expect((await client.get('/app/tokens')).status).toBe(200)
      // The same request from the site itself goes through.
      const genuine = await client.send('POST', route.path(fixture), {
        form: { ...route.form, _csrf: token },
        headers: { origin: SITE },
      })
      expect([200, 201, 303]).toContain(genuine.status)
    })
  }

  test('sign-in and sign-up: refused without the pre-session cookie token or from another site', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    for (const path of ['/app/sign-in', '/app/sign-up']) {
      const client = new DashboardClient(app)
      const token = csrfTokenIn(await (await client.get(path)).text())
      const form = { email: owner.user.email, password: owner.user.password, organization_name: 'X' }
      const crossSite = await client.send('POST', path, {
        form: { ...form, _csrf: token },
        headers: { origin: 'https://evil.example' },
      })
      expect(crossSite.status).toBe(403)
      const stranger = new DashboardClient(app)
      const noCookie = await stranger.send('POST', path, {
        form: { ...form, _csrf: token },
        headers: { origin: SITE },
      })
      expect(noCookie.status).toBe(403)
      expect(stranger.cookies.has(SESSION_COOKIE)).toBe(false)
    }
  })

  test('the session token works only as the cookie it was issued for: a session from the API signs in /app', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const token = await createSession(ctx, owner.user.id)
    const page = await app.handle(
      request('GET', '/app/sources', { headers: { cookie: `${SESSION_COOKIE}=${token}` } }),
    )
    expect(page.status).toBe(200)
  })
})

describe('signing in again comes back to a page', () => {
  /**
   * The class: every page and action of the dashboard, asked for without a session (expired, or
   * signed out in another tab). The sign-in must then land on a page that answers 200: a GET's own
   * page with its query (a filtered list, a search), a form's POST on the page the form was on
   * (Referer): the POST's path is no page (it was a 404 after the sign-in), and resending it would
   * act without the user seeing the form again.
   */
  test('every route: a GET back to itself with its query, a POST back to the page its form was on', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock)
    const formPage = `/app/sources/${data.source.id}/logs?outcome=error`
    const cases = [
      ...PAGES.filter((page) => !page.redirectsTo).map((page) => {
        const path = page.path(data)
        // A form as the browser sends it: its fields and the token of the page it was on.
        const form =
          page.method === 'POST' ? { _csrf: 'of-the-expired-session', ...page.form?.(data) } : undefined
        return {
          label: `${page.method} ${path}`,
          method: page.method,
          path,
          form,
          back: page.method === 'GET' ? path : formPage,
        }
      }),
      {
        label: 'a search',
        method: 'GET',
        path: '/app/leads?q=lead-1',
        form: undefined,
        back: '/app/leads?q=lead-1',
      },
      { label: 'a filtered log', method: 'GET', path: formPage, form: undefined, back: formPage },
    ]
    for (const { label, method, path, form, back } of cases) {
      // A minute apart: the sign-ins stay within the login bucket's 10 a minute.
      clock.advance(61_000)
      const headers: Record<string, string> = form
        ? { origin: SITE, referer: `${SITE}${formPage}`, 'content-type': 'application/x-www-form-urlencoded' }
        : {}
      const body = form && new URLSearchParams(form).toString()
      const refused = await app.handle(new Request(`${SITE}${path}`, { method, headers, body }))
      const location = refused.headers.get('location') ?? ''
      expect({ label, status: refused.status }).toEqual({ label, status: 303 })
      // The sign-in page's own form carries `next`; a browser posts it back with the credentials.
      const client = new DashboardClient(app)
      const signInPage = await client.get(location)
      const html = await signInPage.text()
      const next = /name="next" value="([^"]*)"/.exec(html)?.[1]?.replaceAll('&amp;', '&')
      expect({ label, next }).toEqual({ label, next: back })
      const signedIn = await client.send('POST', '/app/sign-in', {
        form: { _csrf: csrfTokenIn(html), email: data.user.email, password: PASSWORD, next: next! },
        headers: { origin: SITE },
      })
      const landing = signedIn.headers.get('location')!
      expect({ label, status: signedIn.status, landing }).toEqual({ label, status: 303, landing: back })
      const page = await client.get(landing)
      expect({ label, landing, status: page.status }).toEqual({ label, landing, status: 200 })
    }
    expect(cases.filter((entry) => entry.method === 'POST').length).toBeGreaterThan(7)
  })

  test('a POST without a Referer of this dashboard goes back to the dashboard’s home', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    for (const referer of [
      undefined,
      'https://elsewhere.example/app/tokens',
      `${SITE}/api/v2/leads`,
      'not a url',
    ]) {
      const headers: Record<string, string> = { origin: SITE, ...(referer ? { referer } : {}) }
      const response = await app.handle(
        new Request(`${SITE}/app/tokens`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
          body: '_csrf=of-the-expired-session&name=ci',
        }),
      )
      expect({ referer, status: response.status, location: response.headers.get('location') }).toEqual({
        referer,
        status: 303,
        location: '/app/sign-in',
      })
    }
    expect(owner.user.id).toBeString()
  })

  test('a query too long to carry is dropped, the path kept', async () => {
    const { app } = await makeTestApp()
    // Each parameter within its limit, together longer than a `next` may be (500 characters).
    const response = await app.handle(
      request('GET', `/app/leads?q=${'a'.repeat(320)}&cursor=${'c'.repeat(190)}`),
    )
    expect(response.headers.get('location')).toBe(`/app/sign-in?next=${encodeURIComponent('/app/leads')}`)
  })
})
