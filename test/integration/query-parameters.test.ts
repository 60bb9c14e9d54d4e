import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { createSignedInUser, createSource } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'

/**
 * A management route's query takes the parameters its schema names, each once. A misspelt one
 * (`?outcom=error`, `?LIMIT=5`) was ignored, so a filtered list answered 200 with everything, which
 * looks like the filter matching all; a parameter given twice (`?outcome=created&outcome=spam`) was
 * read as one of its values, silently. Both are now 400 `validation_failed` naming the parameter, as
 * a misspelt body field already was (src/lib/strict-body.ts). Checked as a class: every management
 * route of the app that takes a query, every parameter it takes given twice, and one it does not
 * take. A route that takes no query ignores one (a cache-busting `?_=…`), as do the webhook URL
 * (form builders append `?utm_…` to it), tracker.js (cache-busting `?v=`), the probes, Swagger and
 * the dashboard.
 */
const ID = '01900000-0000-7000-8000-000000000000'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

interface Route {
  method: string
  path: string
  hooks?: { query?: { properties?: Record<string, unknown> } }
}

function isManagementRoute(route: Route): boolean {
  return (
    route.path.startsWith('/api/') &&
    !route.path.startsWith('/api/webhook/lead/') &&
    route.path !== '/api/webhook/tracker.js' &&
    route.method !== 'OPTIONS'
  )
}

describe('query parameters of the management API', () => {
  test('every route: a parameter it does not take, and each one it takes given twice, is 400 naming it', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app } = await makeTestApp({ clock })
    const routes = (app.routes as Route[]).filter(isManagementRoute)
    expect(routes.length).toBeGreaterThan(30)
    const problems: string[] = []
    let repeated = 0
    let takingQueries = 0
    for (const route of routes) {
      const path = route.path.replace(/:[a-z_]+/g, ID)
      const known = Object.keys(route.hooks?.query?.properties ?? {})
      // A route that takes no query ignores one (below).
      if (known.length === 0) continue
      takingQueries++
      const cases: Array<[string, { path: string; message: string }]> = [
        [
          'outcom=error',
          { path: '/outcom', message: `unknown parameter; expected one of: ${known.join(', ')}` },
        ],
        ...known.map((name): [string, { path: string; message: string }] => [
          `${name}=1&${name}=2`,
          { path: `/${name}`, message: 'given more than once; give it once' },
        ]),
      ]
      repeated += known.length
      for (const [query, detail] of cases) {
        // A minute a request: the buckets are not what is tested here.
        clock.advance(61_000)
        const response = await app.handle(
          new Request(`http://localhost${path}?${query}`, {
            method: route.method,
            headers:
              route.method === 'GET' || route.method === 'DELETE'
                ? {}
                : { 'content-type': 'application/json' },
            body: route.method === 'GET' || route.method === 'DELETE' ? undefined : '{}',
          }),
        )
        const body = (await response.json()) as { error?: string; details?: unknown[] }
        const got = { status: response.status, error: body.error, details: body.details }
        const expected = { status: 400, error: 'validation_failed', details: [detail] }
        if (JSON.stringify(got) !== JSON.stringify(expected)) {
          problems.push(`${route.method} ${route.path}?${query}: ${JSON.stringify(got)}`)
        }
      }
    }
    expect(takingQueries).toBeGreaterThanOrEqual(8)
    expect(repeated).toBeGreaterThan(15)
    expect(problems).toEqual([])
  })

  test('the parameters a route takes, each once, still work', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    const response = await app.handle(
      new Request(
        `http://localhost/api/webhook/sources/${source.id}/logs?limit=5&outcome=created&status=200`,
        {
          headers: { authorization: `Bearer ${owner.token}` },
        },
      ),
    )
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ data: [], next_cursor: null })
  })

  test('routes outside the management API, and those that take no query, keep taking any', async () => {
    const { app } = await makeTestApp()
    for (const path of [
      '/api/webhook/tracker.js?v=3',
      '/healthz?probe=1',
      '/swagger/json?x=1',
      '/api/auth/me?_=1',
    ]) {
      const response = await app.handle(new Request(`http://localhost${path}`))
      expect({ path, status: response.status }).toEqual({
        path,
        status: path.startsWith('/api/auth/me') ? 401 : 200,
      })
    }
  })
})
