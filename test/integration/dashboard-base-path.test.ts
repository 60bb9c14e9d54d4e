import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { SESSION_COOKIE } from '../../src/modules/auth/credentials'
import { PRE_SESSION_CSRF_COOKIE } from '../../src/modules/dashboard/session'
import { csrfTokenIn, DashboardClient, SITE } from '../helpers/dashboard'
import { organizationWithData, PAGES } from '../helpers/dashboard-pages'
import { createUser } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'

/**
 * The dashboard behind a proxy that serves it under a path (PUBLIC_BASE_URL
 * `https://tools.example.com/crm/leads`, the proxy stripping `/crm/leads` before the service sees the
 * request): every URL a page, a redirect or a cookie hands the browser must carry that path, or the
 * browser asks the proxy for `/app/…`, which is not ours. Checked as a class: every URL attribute of
 * every page and action of the dashboard (the permission tests' table, the entry points, the error
 * pages), every Location and every cookie's Path; and every dashboard route must have been walked.
 * test/browser/dashboard-base-path.test.ts takes the same journey in Chromium through HAProxy.
 */
const BASE_PATH = '/crm/leads'
const PUBLIC_BASE_URL = `https://tools.example.com${BASE_PATH}`
const PASSWORD = 'correct horse battery staple'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** Attributes whose value the browser fetches or navigates to. */
const URL_ATTRIBUTE =
  /\s(href|src|action|formaction|hx-get|hx-post|hx-put|hx-patch|hx-delete|hx-push-url)="([^"]*)"/g

interface Walked {
  method: string
  path: string
  status: number
}

/** Reads what a response hands the browser and fails on any URL outside the base path. */
async function urlsHandedOut(label: string, response: Response) {
  const problems: string[] = []
  const location = response.headers.get('location')
  if (location !== null && !location.startsWith(`${BASE_PATH}/`)) problems.push(`Location: ${location}`)
  for (const cookie of response.headers.getSetCookie()) {
    const path = /;\s*Path=([^;]*)/i.exec(cookie)?.[1]
    if (path !== `${BASE_PATH}/app`) problems.push(`Set-Cookie ${cookie.split('=')[0]} Path=${path}`)
  }
  let rootRelative = 0
  if ((response.headers.get('content-type') ?? '').startsWith('text/html')) {
    const html = await response.clone().text()
    for (const [, attribute, value] of html.matchAll(URL_ATTRIBUTE)) {
      if (!value!.startsWith('/') || value!.startsWith('//')) continue
      rootRelative++
      if (!value!.startsWith(`${BASE_PATH}/`)) problems.push(`${attribute}="${value}"`)
    }
  }
  expect({ label, problems }).toEqual({ label, problems: [] })
  return rootRelative
}

/** A client that records every request, so the walk can be checked against the app's routes. */
function recording(client: DashboardClient, walked: Walked[]) {
  const send = client.send.bind(client)
  client.send = async (method, path, options) => {
    const response = await send(method, path, options)
    walked.push({ method, path, status: response.status })
    await urlsHandedOut(`${method} ${path}`, response)
    return response
  }
  return client
}

describe(`PUBLIC_BASE_URL with a path (${BASE_PATH})`, () => {
  test('every page, redirect and cookie of the dashboard carries the path, and every route is walked', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock, env: { PUBLIC_BASE_URL } })
    const walked: Walked[] = []

    // Entry points without a session.
    const visitor = recording(new DashboardClient(app), walked)
    const root = await visitor.get('/')
    expect({ status: root.status, location: root.headers.get('location') }).toEqual({
      status: 303,
      location: `${BASE_PATH}/app`,
    })
    expect((await visitor.get('/app')).headers.get('location')).toBe(`${BASE_PATH}/app/sign-in`)
    // `next` stays the service's own path: it is where the sign-in's redirect goes, prefixed then.
    expect((await visitor.get('/app/leads')).headers.get('location')).toBe(
      `${BASE_PATH}/app/sign-in?next=${encodeURIComponent('/app/leads')}`,
    )
    // A form posted after the session ended goes back to its page, read from the public Referer.
    const expired = await visitor.send('POST', '/app/tokens', {
      form: { _csrf: 'of-the-expired-session', name: 'ci' },
      headers: { origin: 'https://tools.example.com', referer: `${PUBLIC_BASE_URL}/app/tokens?x=1` },
    })
    expect({ status: expired.status, location: expired.headers.get('location') }).toEqual({
      status: 303,
      location: `${BASE_PATH}/app/sign-in?next=${encodeURIComponent('/app/tokens?x=1')}`,
    })
    const signUpPage = await visitor.get('/app/sign-up')
    expect(signUpPage.status).toBe(200)
    expect(await urlsHandedOut('sign-up page', signUpPage)).toBeGreaterThanOrEqual(6)
    const preSession = signUpPage.headers.getSetCookie()[0]!
    expect(preSession).toStartWith(`${PRE_SESSION_CSRF_COOKIE}=`)
    expect(preSession).toContain(`Path=${BASE_PATH}/app;`)
    const signedUp = await visitor.submit('/app/sign-up', '/app/sign-up', {
      organization_name: 'Acme',
      email: `owner-${crypto.randomUUID()}@example.com`,
      password: PASSWORD,
    })
    expect({ status: signedUp.status, location: signedUp.headers.get('location') }).toEqual({
      status: 303,
      location: `${BASE_PATH}/app`,
    })
    const sessionCookie = signedUp.headers.getSetCookie()[0]!
    expect(sessionCookie).toStartWith(`${SESSION_COOKIE}=`)
    expect(sessionCookie).toContain(`Path=${BASE_PATH}/app;`)
    expect(sessionCookie).toEndWith('; Secure')
    expect((await visitor.get('/app')).headers.get('location')).toBe(`${BASE_PATH}/app/sources`)
    const signOut = await visitor.submit('/app/sources', '/app/sign-out')
    expect({ status: signOut.status, location: signOut.headers.get('location') }).toEqual({
      status: 303,
      location: `${BASE_PATH}/app/sign-in`,
    })

    // Signing in with a `next` comes back to it, under the path.
    const data = await organizationWithData(ctx, app, clock)
    const returning = recording(new DashboardClient(app), walked)
    const signInPage = await returning.get('/app/sign-in?next=%2Fapp%2Ftokens')
    expect(signInPage.status).toBe(200)
    const signedIn = await returning.send('POST', '/app/sign-in', {
      form: {
        _csrf: csrfTokenIn(await signInPage.text()),
        email: data.user.email,
        password: 'x'.repeat(3),
        next: '/app/tokens',
      },
      headers: { origin: SITE },
    })
    // A wrong password is the sign-in page again, its form still under the path.
    expect(signedIn.status).toBe(401)

    // Every page and action of the permission tests, as the owner on the pro plan.
    const owner = recording(await DashboardClient.signedIn(app, ctx, data.user.id), walked)
    for (const page of PAGES) {
      const path = page.path(data)
      const response =
        page.method === 'GET'
          ? await owner.get(path)
          : await owner.submit('/app/tokens', path, page.form?.(data) ?? {})
      expect({ path, ok: [200, 201, 303].includes(response.status) }).toEqual({ path, ok: true })
      if (page.redirectsTo) expect(response.headers.get('location')).toBe(`${BASE_PATH}${page.redirectsTo}`)
    }
    expect((await owner.get('/app')).headers.get('location')).toBe(`${BASE_PATH}/app/sources`)
    // Not in the permission table (a token is revoked by its own user only).
    const revoked = await owner.submit('/app/tokens', `/app/tokens/${data.pat.tokenId}/revoke`)
    expect(revoked.status).toBe(200)

    // The error pages: the errors plugin's, the handlers', the session macro's.
    const errors: Array<[string, Promise<Response>, number]> = [
      ['no such page', owner.get('/app/nope'), 404],
      ['no such asset', owner.get('/app/assets/nope.js'), 404],
      ['not a UUID', owner.get('/app/sources/nope'), 404],
      ['a malformed query', owner.get('/app/sources?deleted=2'), 400],
      [
        'no CSRF token',
        owner.send('POST', '/app/tokens', { form: { name: 'x' }, headers: { origin: SITE } }),
        403,
      ],
    ]
    for (const [label, pending, status] of errors) {
      const response = await pending
      expect({ label, status: response.status }).toEqual({ label, status })
      expect(await urlsHandedOut(label, response)).toBeGreaterThanOrEqual(6)
    }
    const viewer = await createUser(ctx, data.organization.id, { role: 'viewer' })
    const forbidden = await recording(await DashboardClient.signedIn(app, ctx, viewer.id), walked).get(
      '/app/members',
    )
    expect(forbidden.status).toBe(403)
    expect(await urlsHandedOut('a viewer on members', forbidden)).toBeGreaterThanOrEqual(6)

    // The class: every route of the dashboard was asked for at least once above.
    const routes = (app.routes as Array<{ method: string; path: string }>).filter(
      (route) => route.path === '/' || route.path === '/app' || route.path.startsWith('/app/'),
    )
    expect(routes.length).toBeGreaterThan(25)
    const unwalked = routes
      .filter((route) => route.method !== 'HEAD')
      .filter((route) => {
        const pattern = new RegExp(`^${route.path.replace(/:[a-z_]+/g, '[^/]+')}(\\?.*)?$`)
        return !walked.some((request) => request.method === route.method && pattern.test(request.path))
      })
      .map((route) => `${route.method} ${route.path}`)
    expect(unwalked).toEqual([])
  })
})
