import { beforeAll, describe, expect, test } from 'bun:test'
import { createSignedInUser, createSource } from '../helpers/factories'
import { BASE, createViaApi, expectJsonHeaders, RECORD_KEYS, setup } from '../helpers/sources'
import { call, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// Listing sources: order, cursor pages, filters, the organization boundary.

describe('GET /api/webhook/sources', () => {
  test('lists newest first without keys; cursor pages are disjoint and complete', async () => {
    const { app, token } = await setup()
    const created: string[] = []
    for (let index = 0; index < 5; index++)
      created.push((await createViaApi(app, token, { name: `s${index}` })).id)
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const path: string = `${BASE}?limit=2${cursor ? `&cursor=${cursor}` : ''}`
      const response = await call(app, token, 'GET', path)
      expect(response.status).toBe(200)
      expectJsonHeaders(response)
      const body = await response.json()
      expect(body.data.length).toBeLessThanOrEqual(2)
      for (const source of body.data) {
        expect(Object.keys(source).sort()).toEqual(RECORD_KEYS)
        expect(JSON.stringify(source)).not.toContain('flwh_')
        seen.push(source.id)
      }
      cursor = body.next_cursor
      pages++
    } while (cursor)
    expect(pages).toBe(3)
    expect(seen).toEqual([...created].reverse())
  })

  test('a full last page has next_cursor null; default limit is 50', async () => {
    const { app, token } = await setup()
    for (let index = 0; index < 2; index++) await createViaApi(app, token)
    const exact = await (await call(app, token, 'GET', `${BASE}?limit=2`)).json()
    expect(exact.data).toHaveLength(2)
    expect(exact.next_cursor).toBeNull()
    const all = await (await call(app, token, 'GET', BASE)).json()
    expect(all).toEqual({ data: expect.any(Array), next_cursor: null })
    expect(all.data).toHaveLength(2)
  })

  test('?enabled=true|false filters', async () => {
    const { app, token } = await setup()
    const on = await createViaApi(app, token, { name: 'on' })
    const off = await createViaApi(app, token, { name: 'off', enabled: false })
    const enabled = await (await call(app, token, 'GET', `${BASE}?enabled=true`)).json()
    expect(enabled.data.map((source: { id: string }) => source.id)).toEqual([on.id])
    const disabled = await (await call(app, token, 'GET', `${BASE}?enabled=false`)).json()
    expect(disabled.data.map((source: { id: string }) => source.id)).toEqual([off.id])
  })

  test('only the caller organization’s sources are listed', async () => {
    const { app, ctx, token } = await setup()
    const other = await createSignedInUser(ctx)
    await createSource(ctx, other.organization.id)
    const mine = await createViaApi(app, token)
    const body = await (await call(app, token, 'GET', BASE)).json()
    expect(body.data.map((source: { id: string }) => source.id)).toEqual([mine.id])
  })

  test('400 for a bad limit, enabled value or cursor', async () => {
    const { app, token } = await setup()
    for (const query of ['limit=0', 'limit=201', 'limit=abc', 'enabled=maybe', 'cursor=bm90LWEtY3Vyc29y']) {
      const response = await call(app, token, 'GET', `${BASE}?${query}`)
      expect({ query, status: response.status }).toEqual({ query, status: 400 })
      expect((await response.json()).error).toBe('validation_failed')
    }
  })
})
