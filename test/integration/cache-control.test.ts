import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { createSignedInUser, createSource } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * The management API's answers carry leads, tokens, webhook keys and sessions: `Cache-Control:
 * no-store` on every one of them, errors included (OWASP ASVS 8.2.1), so no browser's disk cache or
 * proxy keeps them. Before, only the CSV export said so. The document requires the header on every
 * response of the management API, so the contract check of every integration test holds it too
 * (test/helpers/contract.ts); this walks every route. tracker.js stays publicly cacheable, and the
 * webhook URL and the probes carry no such header.
 */
const ID = '01900000-0000-7000-8000-000000000000'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

describe('Cache-Control: no-store on the management API', () => {
  test('every route, without a credential: the refusal is not stored either', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app } = await makeTestApp({ clock, contract: false })
    const routes = (app.routes as Array<{ method: string; path: string }>).filter(
      (route) =>
        route.path.startsWith('/api/') &&
        !route.path.startsWith('/api/webhook/lead/') &&
        route.path !== '/api/webhook/tracker.js',
    )
    expect(routes.length).toBeGreaterThan(30)
    const missing: string[] = []
    for (const route of routes) {
      clock.advance(61_000)
      const response = await app.handle(
        request(route.method, route.path.replace(/:[a-z_]+/g, ID), {
          json: route.method === 'GET' || route.method === 'DELETE' ? undefined : {},
        }),
      )
      if (response.headers.get('cache-control') !== 'no-store') {
        missing.push(
          `${route.method} ${route.path} → ${response.status}: ${response.headers.get('cache-control')}`,
        )
      }
    }
    expect(missing).toEqual([])
  })

  test('answers that carry secrets and personal data: a session, a token, a key, leads', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    const auth = { authorization: `Bearer ${owner.token}` }
    const answers = [
      await app.handle(
        request('POST', '/api/auth/login', {
          json: { email: owner.user.email, password: owner.user.password },
        }),
      ),
      await app.handle(
        request('POST', '/api/pat', { headers: auth, json: { name: 'ci', scopes: ['leads.read'] } }),
      ),
      await app.handle(
        request('POST', `/api/webhook/sources/${source.id}/regenerate-key`, { headers: auth, json: {} }),
      ),
      await app.handle(request('GET', '/api/v2/leads', { headers: auth })),
    ]
    expect(answers.map((response) => [response.status, response.headers.get('cache-control')])).toEqual([
      [200, 'no-store'],
      [201, 'no-store'],
      [200, 'no-store'],
      [200, 'no-store'],
    ])
  })

  test('outside the management API: tracker.js publicly cacheable, the probes and the webhook URL without it', async () => {
    const { app } = await makeTestApp()
    const tracker = await app.handle(request('GET', '/api/webhook/tracker.js'))
    expect(tracker.headers.get('cache-control')).toStartWith('public')
    for (const path of ['/healthz', '/readyz']) {
      expect((await app.handle(request('GET', path))).headers.get('cache-control')).toBeNull()
    }
    const inbound = await app.handle(
      request('POST', `/api/webhook/lead/lc_live_${'x'.repeat(40)}`, { json: {} }),
    )
    expect(inbound.status).toBe(404)
    expect(inbound.headers.get('cache-control')).toBeNull()
  })
})
