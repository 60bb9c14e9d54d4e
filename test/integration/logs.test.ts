import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { generateSecret } from '../../src/lib/secrets'
import { runCommonRouteTests } from '../helpers/common-route-tests'
import {
  type Expected,
  email,
  floodUntilLimited,
  get,
  post,
  postRaw,
  sendMix,
  setupSource,
} from '../helpers/delivery-traffic'
import { createOrganization, createSignedInUser, createSource } from '../helpers/factories'

// PGlite runs every statement in-process: a test that sends ~70 inbound requests needs more than 5 s.
setDefaultTimeout(60_000)

const START = Date.UTC(2026, 2, 10, 9, 15)
const FLOOD = 40

type Entry = Record<string, unknown> & { id: string; received_at: string; repeat_count: number }

async function trafficSource() {
  const clock = new FakeClock(START)
  const setup = await setupSource(clock)
  const mix = await sendMix(setup.app, setup.apiKey, clock)
  const fillers = await floodUntilLimited(setup.services, setup.app, setup.apiKey, mix.length, FLOOD)
  return { ...setup, clock, mix, fillers }
}

async function page(app: Awaited<ReturnType<typeof trafficSource>>['app'], path: string, token: string) {
  const response = await get(app, path, token)
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toContain('application/json')
  return (await response.json()) as { data: Entry[]; next_cursor: string | null }
}

async function allPages(
  app: Awaited<ReturnType<typeof trafficSource>>['app'],
  base: string,
  token: string,
  limit: number,
) {
  const pages: Entry[][] = []
  let cursor: string | null = null
  do {
    const separator = base.includes('?') ? '&' : '?'
    const body = await page(
      app,
      `${base}${separator}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      token,
    )
    pages.push(body.data)
    cursor = body.next_cursor
  } while (cursor)
  return pages
}

describe('GET /api/webhook/sources/{id}/logs', () => {
  test('every inbound request is listed, newest first, with its outcome, status and reason', async () => {
    const { app, token, source, mix, fillers } = await trafficSource()
    const body = await page(app, `/api/webhook/sources/${source.id}/logs?limit=200`, token)
    expect(body.next_cursor).toBeNull()
    const throttled = body.data.filter((entry) => entry.http_status === 429)
    const others = body.data.filter((entry) => entry.http_status !== 429)
    // The flood is a handful of aggregated rows (one per second of real time at most), not 40.
    expect(throttled.length).toBeGreaterThanOrEqual(1)
    expect(throttled.length).toBeLessThanOrEqual(3)
    expect(throttled.reduce((sum, entry) => sum + entry.repeat_count, 0)).toBe(FLOOD)
    for (const entry of throttled)
      expect(entry).toMatchObject({ outcome: 'rejected', reason: 'rate_limited' })
    expect(others).toHaveLength(mix.length + fillers)
    // Oldest first in `mix`; the list is newest first and the fillers came after the mix.
    const listedMix = others.slice(fillers).reverse()
    expect(listedMix.map(({ outcome, http_status, reason }) => ({ outcome, http_status, reason }))).toEqual(
      mix as Expected[],
    )
    const sorted = [...body.data].sort(
      (a, b) => b.received_at.localeCompare(a.received_at) || b.id.localeCompare(a.id),
    )
    expect(body.data.map((entry) => entry.id)).toEqual(sorted.map((entry) => entry.id))
    const created = listedMix[0]!
    expect(created).toEqual({
      id: expect.any(String),
      received_at: new Date(START).toISOString(),
      method: 'POST',
      http_status: 200,
      outcome: 'created',
      reason: null,
      lead_id: expect.any(String),
      client_ip: '10.1.2.3',
      origin: null,
      user_agent: null,
      body_bytes: expect.any(Number),
      body_truncated: false,
      spam_reasons: [],
      duration_ms: expect.any(Number),
      repeat_count: 1,
    })
    expect(created).not.toHaveProperty('body')
    expect(listedMix[2]!.spam_reasons).toEqual(['honeypot_filled:_gotcha'])
    expect(listedMix[7]!.body_bytes).toBeGreaterThan(102_400)
  })

  test('cursor pages are disjoint, ordered, and together are the whole list', async () => {
    const { app, token, source } = await trafficSource()
    const whole = (await page(app, `/api/webhook/sources/${source.id}/logs?limit=200`, token)).data
    const pages = await allPages(app, `/api/webhook/sources/${source.id}/logs`, token, 7)
    expect(pages.slice(0, -1).every((data) => data.length === 7)).toBe(true)
    const ids = pages.flat().map((entry) => entry.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids).toEqual(whole.map((entry) => entry.id))
    const defaultPage = await page(app, `/api/webhook/sources/${source.id}/logs`, token)
    expect(defaultPage.data).toHaveLength(50)
    expect(defaultPage.next_cursor).toEqual(expect.any(String))
  })

  test('filters: outcome, HTTP status, since/until, combined with cursor pages', async () => {
    const { app, token, source, fillers } = await trafficSource()
    const base = `/api/webhook/sources/${source.id}/logs`
    const rejected = (await allPages(app, `${base}?outcome=rejected`, token, 2)).flat()
    expect(rejected.every((entry) => entry.outcome === 'rejected')).toBe(true)
    expect(rejected.filter((entry) => entry.http_status !== 429).map((entry) => entry.reason)).toEqual([
      'payload_too_large',
      'ip_not_allowed',
      'validation_failed',
      'invalid_json',
    ])
    const created = (await allPages(app, `${base}?outcome=created`, token, 10)).flat()
    expect(created).toHaveLength(1 + fillers)
    const throttled = (await page(app, `${base}?status=429`, token)).data
    expect(throttled.every((entry) => entry.http_status === 429 && entry.reason === 'rate_limited')).toBe(
      true,
    )
    expect(throttled.reduce((sum, entry) => sum + entry.repeat_count, 0)).toBe(FLOOD)
    const badRequests = (await page(app, `${base}?status=400&outcome=rejected`, token)).data
    expect(badRequests.map((entry) => entry.reason)).toEqual(['validation_failed', 'invalid_json'])
    expect((await page(app, `${base}?status=400&outcome=created`, token)).data).toEqual([])
    // 200 is every outcome but `rejected`: the list reads those outcomes' ranges only, and misses none
    const whole = (await allPages(app, base, token, 50)).flat()
    const answered200 = (await allPages(app, `${base}?status=200`, token, 3)).flat()
    expect(answered200.map((entry) => entry.id)).toEqual(
      whole.filter((entry) => entry.http_status === 200).map((entry) => entry.id),
    )
    expect(new Set(answered200.map((entry) => entry.outcome))).toEqual(
      new Set(['created', 'updated', 'spam', 'error']),
    )
    // The mix is 1 s apart from START: [START+2s, START+5s) holds spam, error and invalid_json.
    const since = new Date(START + 2000).toISOString()
    const until = new Date(START + 5000).toISOString()
    const windowed = (await allPages(app, `${base}?since=${since}&until=${until}`, token, 1)).flat()
    expect(windowed.map((entry) => entry.outcome)).toEqual(['rejected', 'error', 'spam'])
    expect(windowed.map((entry) => entry.received_at)).toEqual([
      new Date(START + 4000).toISOString(),
      new Date(START + 3000).toISOString(),
      since,
    ])
  })

  test('400 for a bad query: unknown outcome, limit over 200, a cursor this API did not make', async () => {
    const { app, token, source } = await setupSource(new FakeClock(START))
    const base = `/api/webhook/sources/${source.id}/logs`
    for (const query of [
      'outcome=lost',
      'limit=201',
      'limit=0',
      'status=abc',
      'since=yesterday',
      'cursor=abc',
    ]) {
      const response = await get(app, `${base}?${query}`, token)
      expect(response.status).toBe(400)
      const body = await response.json()
      expect(body).toMatchObject({
        error: 'validation_failed',
        request_id: response.headers.get('x-request-id'),
      })
    }
  })

  test('an empty source lists nothing', async () => {
    const { app, token, source } = await setupSource(new FakeClock(START))
    expect(await page(app, `/api/webhook/sources/${source.id}/logs`, token)).toEqual({
      data: [],
      next_cursor: null,
    })
  })

  test('404 for another organization’s source and for an unknown id, with one body', async () => {
    const { app, ctx, token, apiKey } = await setupSource(new FakeClock(START))
    await post(app, apiKey, { email: email() })
    const other = await createOrganization(ctx)
    const { source: foreign } = await createSource(ctx, other.id)
    for (const id of [foreign.id, crypto.randomUUID()]) {
      const response = await get(app, `/api/webhook/sources/${id}/logs`, token)
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({
        error: 'source_not_found',
        message: 'source not found',
        request_id: response.headers.get('x-request-id'),
      })
    }
    const malformed = await get(app, '/api/webhook/sources/not-a-uuid/logs', token)
    expect(malformed.status).toBe(400)
  })
})

describe('GET /api/webhook/sources/{id}/logs/{log_id}', () => {
  test('the entry with its body parsed as JSON; secrets in body and headers are masked', async () => {
    const clock = new FakeClock(START)
    const { app, token, source, apiKey } = await setupSource(clock)
    const leaked = generateSecret('source_key')
    const response = await post(
      app,
      apiKey,
      { email: email(), note: `my key is ${leaked}` },
      { referer: `https://forms.example/${apiKey}?x=1`, 'user-agent': `agent ${leaked}` },
    )
    expect(response.status).toBe(200)
    const [listed] = (await page(app, `/api/webhook/sources/${source.id}/logs`, token)).data
    const single = await get(app, `/api/webhook/sources/${source.id}/logs/${listed!.id}`, token)
    expect(single.status).toBe(200)
    const entry = await single.json()
    expect(entry).toEqual({ ...listed, body: { email: expect.any(String), note: expect.any(String) } })
    const text = JSON.stringify(entry)
    for (const secret of [leaked, apiKey]) {
      expect(text).not.toContain(secret)
      expect(text).toContain(`${secret.slice(0, 9)}…${secret.slice(-4)}`)
    }
    expect(entry.origin).toStartWith('https://forms.example/flwh_')
  })

  test('a body that is not JSON, and one cut at 8 KB, come back as text with body_truncated', async () => {
    const clock = new FakeClock(START)
    const { app, token, source, apiKey } = await setupSource(clock)
    expect((await postRaw(app, apiKey, 'name=Ada&email=x')).status).toBe(400)
    clock.advance(1000)
    const big = JSON.stringify({ email: email(), notes: 'n'.repeat(20_000) })
    expect((await postRaw(app, apiKey, big)).status).toBe(200)
    const [large, form] = (await page(app, `/api/webhook/sources/${source.id}/logs`, token)).data
    const formEntry = await (
      await get(app, `/api/webhook/sources/${source.id}/logs/${form!.id}`, token)
    ).json()
    expect(formEntry).toMatchObject({
      reason: 'invalid_json',
      body: 'name=Ada&email=x',
      body_truncated: false,
    })
    const largeEntry = await (
      await get(app, `/api/webhook/sources/${source.id}/logs/${large!.id}`, token)
    ).json()
    expect(largeEntry.body_truncated).toBe(true)
    expect(largeEntry.body_bytes).toBe(Buffer.byteLength(big))
    expect(typeof largeEntry.body).toBe('string')
    expect(big.startsWith(largeEntry.body)).toBe(true)
    expect(Buffer.byteLength(largeEntry.body)).toBeLessThanOrEqual(8192)
  })

  test('404 for an unknown entry, another source’s entry, and another organization’s source', async () => {
    const clock = new FakeClock(START)
    const { app, ctx, token, organization, source, apiKey } = await setupSource(clock)
    await post(app, apiKey, { email: email() })
    const [entry] = (await page(app, `/api/webhook/sources/${source.id}/logs`, token)).data
    const sibling = await createSource(ctx, organization.id)
    const stranger = await createSignedInUser(ctx)
    const cases: Array<[string, string, string]> = [
      [`/api/webhook/sources/${source.id}/logs/${crypto.randomUUID()}`, token, 'log_not_found'],
      [`/api/webhook/sources/${sibling.source.id}/logs/${entry!.id}`, token, 'log_not_found'],
      [`/api/webhook/sources/${source.id}/logs/${entry!.id}`, stranger.token, 'source_not_found'],
    ]
    for (const [path, as, code] of cases) {
      const response = await get(app, path, as)
      expect(response.status).toBe(404)
      expect((await response.json()).error).toBe(code)
    }
  })
})

const sourcePath = async (fixture: { ctx: Parameters<typeof createSource>[0]; organizationId: string }) =>
  `/api/webhook/sources/${(await createSource(fixture.ctx, fixture.organizationId)).source.id}`

runCommonRouteTests({
  method: 'GET',
  path: async (fixture) => `${await sourcePath(fixture)}/logs`,
  permission: 'settings.integrations',
  feature: 'integrations',
})

runCommonRouteTests({
  method: 'GET',
  path: async (fixture) => `${await sourcePath(fixture)}/logs/${crypto.randomUUID()}`,
  permission: 'settings.integrations',
  feature: 'integrations',
})
