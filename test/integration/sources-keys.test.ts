import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { digestSecret, isWellFormedSecret } from '../../src/lib/secrets'
import { BASE, createViaApi, expectJsonHeaders, RECORD_KEYS, setup, within } from '../helpers/sources'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// A source's key: regeneration, grace windows.

describe('POST /api/webhook/sources/{id}/regenerate-key', () => {
  test('a new key once; the old digest stops resolving at once, here and on another replica', async () => {
    const clock = new FakeClock()
    const { app, ctx, services, token } = await setup({ clock })
    const replica = await makeTestApp({ clock })
    const created = await createViaApi(app, token)
    const oldDigest = digestSecret(created.api_key)
    expect((await replica.services.sourceCache.findByKeyDigest(oldDigest))?.id).toBe(created.id)
    clock.advance(1000)
    // No body at all: grace_seconds is optional.
    const response = await app.handle(request('POST', `${BASE}/${created.id}/regenerate-key`, { token }))
    expect(response.status).toBe(200)
    expectJsonHeaders(response)
    expect(response.headers.get('x-ratelimit-limit')).toBe('10')
    const body = await response.json()
    expect(Object.keys(body).sort()).toEqual([...RECORD_KEYS, 'api_key', 'webhook_url'].sort())
    expect(body.api_key).not.toBe(created.api_key)
    expect(isWellFormedSecret('source_key', body.api_key)).toBe(true)
    expect(body.webhook_url).toBe(`http://lead-capture.test/api/webhook/lead/${body.api_key}`)
    expect(body.key_hint).toBe(body.api_key.slice(-4))
    expect(body.key_rotated_at).toBe(new Date(clock.now()).toISOString())
    expect(body.updated_at).toBe(body.key_rotated_at)

    expect(await services.sourceCache.findByKeyDigest(oldDigest)).toBeNull()
    expect((await services.sourceCache.findByKeyDigest(digestSecret(body.api_key)))?.id).toBe(created.id)
    expect(
      await within(
        1000,
        async () => (await replica.services.sourceCache.findByKeyDigest(oldDigest)) === null,
      ),
    ).toBe(true)
    const [row] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, created.id))
    expect(row).toMatchObject({ keyDigest: digestSecret(body.api_key), previousKeyDigest: null })

    // Neither GET nor the list shows the new key.
    const fetched = await (await call(app, token, 'GET', `${BASE}/${created.id}`)).json()
    expect(fetched.api_key).toBeUndefined()
    expect(fetched.webhook_url).toBeUndefined()
    expect(fetched.key_hint).toBe(body.key_hint)
    expect(JSON.stringify(await (await call(app, token, 'GET', BASE)).json())).not.toContain(body.api_key)
  })

  test('with grace_seconds the old key resolves until the window ends, by the context clock', async () => {
    const clock = new FakeClock()
    const { app, services, token } = await setup({ clock })
    const created = await createViaApi(app, token)
    const oldDigest = digestSecret(created.api_key)
    const response = await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, {
      grace_seconds: 60,
    })
    expect(response.status).toBe(200)
    const body = await response.json()
    const newDigest = digestSecret(body.api_key)
    const cache = services.sourceCache
    expect((await cache.findByKeyDigest(oldDigest))?.id).toBe(created.id)
    expect((await cache.findByKeyDigest(newDigest))?.id).toBe(created.id)
    clock.advance(59_000)
    expect((await cache.findByKeyDigest(oldDigest))?.id).toBe(created.id)
    // A fresh replica reads the row from the database: the SQL check uses the same clock.
    const replica = await makeTestApp({ clock })
    expect((await replica.services.sourceCache.findByKeyDigest(oldDigest))?.id).toBe(created.id)
    clock.advance(1000)
    expect(await cache.findByKeyDigest(oldDigest)).toBeNull()
    expect(await replica.services.sourceCache.findByKeyDigest(oldDigest)).toBeNull()
    expect((await cache.findByKeyDigest(newDigest))?.id).toBe(created.id)
  })

  test('a second regeneration ends the first grace window at once', async () => {
    const { app, services, token } = await setup()
    const created = await createViaApi(app, token)
    const first = await (
      await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, { grace_seconds: 3600 })
    ).json()
    const second = await (
      await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, { grace_seconds: 3600 })
    ).json()
    const cache = services.sourceCache
    expect(await cache.findByKeyDigest(digestSecret(created.api_key))).toBeNull()
    expect((await cache.findByKeyDigest(digestSecret(first.api_key)))?.id).toBe(created.id)
    expect((await cache.findByKeyDigest(digestSecret(second.api_key)))?.id).toBe(created.id)
  })

  test('400 for grace_seconds out of range or of the wrong type', async () => {
    const { app, token } = await setup()
    const created = await createViaApi(app, token)
    for (const json of [
      { grace_seconds: -1 },
      { grace_seconds: 86_401 },
      { grace_seconds: 1.5 },
      { grace_seconds: 'soon' },
    ]) {
      const response = await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, json)
      expect({ json, status: response.status }).toEqual({ json, status: 400 })
      expect((await response.json()).error).toBe('validation_failed')
    }
    const atMax = await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, {
      grace_seconds: 86_400,
    })
    expect(atMax.status).toBe(200)
  })
})
