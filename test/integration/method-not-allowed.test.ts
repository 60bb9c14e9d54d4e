import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * A method a path does not serve (RFC 9110 §15.5.6): 405 with `Allow` naming what the path does
 * serve, not a 404 "route not found" that tells a client sending PUT where PATCH is meant that its
 * URL is wrong; OPTIONS on a served path: 204 with the same `Allow` (§9.3.7). Checked as a class:
 * every path template of the app, every method of HTTP's usual set, against the methods the app
 * itself registered for that template.
 */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
const ID = '01900000-0000-7000-8000-000000000000'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** What a path serves: its registered methods, HEAD with GET, and OPTIONS. */
function allowOf(served: Set<string>): string {
  const methods = new Set(served)
  if (methods.has('GET')) methods.add('HEAD')
  methods.add('OPTIONS')
  return [...methods].sort().join(', ')
}

describe('405 Method Not Allowed, with Allow', () => {
  test('every path of the app × every method it does not serve', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app } = await makeTestApp({ clock, contract: false })
    const byPath = new Map<string, Set<string>>()
    for (const route of app.routes as Array<{ method: string; path: string }>) {
      if (route.method === 'ALL') continue
      const methods = byPath.get(route.path) ?? new Set<string>()
      methods.add(route.method)
      byPath.set(route.path, methods)
    }
    expect(byPath.size).toBeGreaterThan(40)
    const problems: string[] = []
    let checked = 0
    for (const [template, served] of byPath) {
      const path = template.replace(/:[a-z_]+/g, ID).replace(/\*$/, 'x')
      // Another template that matches the same path serves its methods there too (Elysia's router
      // prefers the static segment): those are served, not refused.
      const alsoServed = new Set<string>()
      for (const [other, methods] of byPath) {
        const pattern = new RegExp(`^${other.replace(/:[a-z_]+/g, '[^/]+').replace(/\*$/, '.*')}$`)
        if (pattern.test(path)) for (const method of methods) alsoServed.add(method)
      }
      const allow = allowOf(alsoServed)
      // A minute a path: the anonymous bucket (100 a minute per IP) is not what is tested here.
      clock.advance(61_000)
      for (const method of METHODS) {
        if (alsoServed.has(method) || (method === 'HEAD' && alsoServed.has('GET'))) continue
        checked++
        const response = await app.handle(request(method, path, { headers: { origin: 'http://localhost' } }))
        const expected = method === 'OPTIONS' ? 204 : 405
        const got = { status: response.status, allow: response.headers.get('allow') }
        if (got.status !== expected || got.allow !== allow) {
          problems.push(
            `${method} ${template}: ${JSON.stringify(got)}, expected ${expected} with Allow: ${allow}`,
          )
        }
      }
    }
    expect(checked).toBeGreaterThan(150)
    expect(problems).toEqual([])
  })

  test('the body of a 405: the error, what was sent and what is allowed, the request id', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(
      request('PUT', `/api/webhook/sources/${ID}`, { headers: { 'x-request-id': 'req-405' } }),
    )
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe('DELETE, GET, HEAD, OPTIONS, PATCH')
    expect(response.headers.get('content-type')).toContain('application/json')
    expect(await response.json()).toEqual({
      error: 'method_not_allowed',
      message: 'PUT is not allowed here; allowed: DELETE, GET, HEAD, OPTIONS, PATCH',
      request_id: 'req-405',
    })
  })

  test('OPTIONS on a served path: 204, Allow, no body', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(request('OPTIONS', '/api/v2/leads'))
    expect(response.status).toBe(204)
    expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS')
    expect(await response.text()).toBe('')
  })

  test('a path nothing serves is still 404 for every method', async () => {
    const { app } = await makeTestApp()
    for (const method of METHODS) {
      const response = await app.handle(request(method, '/api/nothing-here'))
      expect({ method, status: response.status, allow: response.headers.get('allow') }).toEqual({
        method,
        status: 404,
        allow: null,
      })
    }
  })

  test('the dashboard answers a 405 as a page', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(request('DELETE', '/app/sources'))
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS, POST')
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(await response.text()).toContain('DELETE is not allowed here')
  })
})
