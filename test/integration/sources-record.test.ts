import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { digestSecret } from '../../src/lib/secrets'
import { BASE, createViaApi, expectJsonHeaders, RECORD_KEYS, setup, within } from '../helpers/sources'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// One source: read, change its settings, disable, delete (and the effect on every replica).

describe('GET/PATCH/DELETE /api/webhook/sources/{id}', () => {
  test('GET returns the record without the key', async () => {
    const { app, token } = await setup()
    const created = await createViaApi(app, token, { ip_allowlist: ['10.0.0.0/8'] })
    const response = await call(app, token, 'GET', `${BASE}/${created.id}`)
    expect(response.status).toBe(200)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(Object.keys(body).sort()).toEqual(RECORD_KEYS)
    const { api_key: _key, webhook_url: _url, ...record } = created
    expect(body).toEqual(record)
  })

  test('PATCH changes only the fields sent and bumps updated_at', async () => {
    const clock = new FakeClock()
    const { app, token } = await setup({ clock })
    const created = await createViaApi(app, token, {
      domain_allowlist: ['example.com'],
      default_country: 'US',
    })
    clock.advance(5000)
    const response = await call(app, token, 'PATCH', `${BASE}/${created.id}`, {
      name: 'Renamed',
      ip_allowlist: ['2001:db8::/48'],
      field_mapping: { mail: 'email' },
      default_country: null,
      spam_filter: false,
    })
    expect(response.status).toBe(200)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(body).toMatchObject({
      id: created.id,
      name: 'Renamed',
      enabled: true,
      ip_allowlist: ['2001:db8::/48'],
      domain_allowlist: ['example.com'],
      field_mapping: { mail: 'email' },
      default_country: null,
      spam_filter: false,
      created_at: created.created_at,
      updated_at: new Date(clock.now()).toISOString(),
    })
    expect(body.api_key).toBeUndefined()
    // An empty PATCH changes nothing.
    const unchanged = await call(app, token, 'PATCH', `${BASE}/${created.id}`, {})
    expect(unchanged.status).toBe(200)
    expect(await unchanged.json()).toEqual(body)
  })

  test('PATCH validates entries like POST', async () => {
    const { app, token } = await setup()
    const created = await createViaApi(app, token)
    const response = await call(app, token, 'PATCH', `${BASE}/${created.id}`, {
      ip_allowlist: ['10.0.0.0/8', '300.1.1.1'],
      domain_allowlist: ['*.*.example.com'],
    })
    expect(response.status).toBe(400)
    const body = await response.json()
    expect(body.error).toBe('validation_failed')
    expect(body.details.map((detail: { path: string }) => detail.path)).toEqual([
      '/ip_allowlist/1',
      '/domain_allowlist/0',
    ])
    const after = await (await call(app, token, 'GET', `${BASE}/${created.id}`)).json()
    expect(after.ip_allowlist).toEqual([])
  })

  test('a misspelt field is a 400 naming it, not a 200 that changes nothing', async () => {
    const { app, token } = await setup()
    const created = await createViaApi(app, token)
    const response = await call(app, token, 'PATCH', `${BASE}/${created.id}`, { enable: false })
    expect(response.status).toBe(400)
    expectJsonHeaders(response)
    const body = await response.json()
    expect(body.error).toBe('validation_failed')
    expect(body.details).toEqual([{ path: '/enable', message: expect.stringContaining('unknown field') }])
    const after = await (await call(app, token, 'GET', `${BASE}/${created.id}`)).json()
    expect(after.enabled).toBe(true)
    const create = await call(app, token, 'POST', BASE, { name: 'x', spamfilter: false })
    expect(create.status).toBe(400)
    expect((await create.json()).details[0].path).toBe('/spamfilter')
  })

  test('disabling reaches a second replica through NOTIFY within 1 s; enabling brings the key back', async () => {
    const { app, services, token } = await setup()
    const replica = await makeTestApp()
    const created = await createViaApi(app, token)
    const digest = digestSecret(created.api_key)
    // Warm the second replica's cache so only an announcement can change what it answers.
    expect((await replica.services.sourceCache.findByKeyDigest(digest))?.enabled).toBe(true)
    const started = performance.now()
    const response = await call(app, token, 'PATCH', `${BASE}/${created.id}`, { enabled: false })
    expect(response.status).toBe(200)
    expect((await response.json()).enabled).toBe(false)
    const disabledInTime = await within(1000, async () => {
      return (await replica.services.sourceCache.findByKeyDigest(digest))?.enabled === false
    })
    expect(disabledInTime).toBe(true)
    expect(performance.now() - started).toBeLessThan(1100)
    const inbound = await replica.app.handle(
      request('POST', `/api/webhook/lead/${created.api_key}`, { json: { email: 'a@example.com' } }),
    )
    expect(inbound.status).toBe(404)
    expect((await services.sourceCache.findByKeyDigest(digest))?.enabled).toBe(false)

    await call(app, token, 'PATCH', `${BASE}/${created.id}`, { enabled: true })
    expect(
      await within(
        1000,
        async () => (await replica.services.sourceCache.findByKeyDigest(digest))?.enabled === true,
      ),
    ).toBe(true)
  })

  test('DELETE → 204 with no body; the key stops on every replica; a second DELETE is 404', async () => {
    const { app, services, token } = await setup()
    const replica = await makeTestApp()
    const created = await createViaApi(app, token)
    const digest = digestSecret(created.api_key)
    expect(await replica.services.sourceCache.findByKeyDigest(digest)).not.toBeNull()
    const response = await call(app, token, 'DELETE', `${BASE}/${created.id}`)
    expect(response.status).toBe(204)
    expect(response.headers.get('x-request-id')).toBeTruthy()
    expect(response.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/)
    expect(await response.text()).toBe('')
    expect(
      await within(1000, async () => (await replica.services.sourceCache.findByKeyDigest(digest)) === null),
    ).toBe(true)
    expect(await services.sourceCache.findByKeyDigest(digest)).toBeNull()
    expect((await call(app, token, 'GET', `${BASE}/${created.id}`)).status).toBe(404)
    const again = await call(app, token, 'DELETE', `${BASE}/${created.id}`)
    expect(again.status).toBe(404)
    expect((await again.json()).error).toBe('not_found')
  })
})
