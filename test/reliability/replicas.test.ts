import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { leads } from '../../src/db/schema'
import { createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import {
  cleanupAll,
  createTestDatabase,
  postLead,
  type Replica,
  seedContext,
  spawnReplica,
  type TestDatabase,
  uniqueEmail,
  waitUntil,
} from './support'

/**
 * Two replicas of the service on one PostgreSQL (a database of this file's own) and one Redis: what
 * one replica knows (rate-limit counts, a disabled source, a lead) the other knows too.
 * Needs real services: PGlite cannot be shared between processes.
 */
const realServices = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL)

describe.skipIf(!realServices)('two replicas on one PostgreSQL and one Redis', () => {
  let database: TestDatabase
  let ctx: AppContext
  let organizationId: string
  let sessionToken: string
  let replicas: [Replica, Replica]

  const api = (replica: Replica, method: string, path: string, token: string, body?: unknown) =>
    fetch(`${replica.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    })

  beforeAll(async () => {
    database = await createTestDatabase()
    ctx = await seedContext(database.url)
    organizationId = (await createOrganization(ctx)).id
    const owner = await createUser(ctx, organizationId, { role: 'owner' })
    sessionToken = await createSession(ctx, owner.id)
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: process.env.REDIS_URL,
      DATABASE_POOL_SIZE: '8',
      // The test is the proxy: its X-Forwarded-For gives the 404 polls a client IP of their own, so
      // the per-IP limit on unknown keys (shared in Redis with anything else on it) cannot interfere.
      TRUST_PROXY: '127.0.0.1/32',
    }
    replicas = await Promise.all([spawnReplica({ env }), spawnReplica({ env })])
  }, 60_000)

  afterAll(cleanupAll, 30_000)

  test('the per-key limit holds across replicas: of 120 alternating POSTs, 60 are 200 and 60 are 429', async () => {
    const { apiKey } = await createSource(ctx, organizationId)
    const statuses: number[] = []
    for (let index = 0; index < 120; index++) {
      const sent = await postLead(replicas[index % 2]!.url, apiKey, { email: uniqueEmail('limit') })
      statuses.push(sent.status)
      if (sent.status === 429) {
        expect(sent.headers.get('retry-after')).toBe('60')
        expect(sent.body).toMatchObject({ error: 'rate_limited', limit: 60, remaining: 0 })
      }
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(60)
    expect(statuses.filter((status) => status === 429)).toHaveLength(60)
    // Sequential: the first 60 pass, every later one is refused, whichever replica it reached.
    expect(statuses.slice(0, 60).every((status) => status === 200)).toBe(true)
  }, 60_000)

  test('100 concurrent identical submissions over both replicas give one lead: 1 created, 99 updated', async () => {
    // The per-key limit (60/min) would refuse 40 of 100 requests to one source. Dedup is per
    // organization, not per source, so the same 100 submissions are sent through two sources of
    // the organization (50 each, 25 of those to each replica): still one lead, and no 429 hides
    // a race.
    const sources = [await createSource(ctx, organizationId), await createSource(ctx, organizationId)]
    const address = uniqueEmail('concurrent')
    const lead = { first_name: 'Grace', email: address, phone_raw: '+1 202 555 0143', status: 'new' }
    // Warm both replicas' source caches (an informational GET, 2 more per key: 52 of 60) so the
    // 100 requests meet at the database rather than at the source lookup.
    for (const replica of replicas) {
      for (const { apiKey } of sources) {
        expect((await fetch(`${replica.url}/api/webhook/lead/${apiKey}`)).status).toBe(200)
      }
    }
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, index) =>
        postLead(replicas[index % 2]!.url, sources[Math.floor(index / 2) % 2]!.apiKey, lead, 20_000),
      ),
    )
    const failures = results.filter((result) => result.status !== 200)
    expect(failures.map((failure) => failure.failed ?? failure.body)).toEqual([])
    const outcomes = results.map((result) => result.body?.status)
    expect(outcomes.filter((outcome) => outcome === 'created')).toHaveLength(1)
    expect(outcomes.filter((outcome) => outcome === 'updated')).toHaveLength(99)
    const leadIds = new Set(results.map((result) => result.body?.lead_id))
    expect(leadIds.size).toBe(1)
    const rows = await ctx.db.select().from(leads).where(eq(leads.emailNormalized, address))
    expect(rows).toHaveLength(1)
    expect(rows[0]!.id).toBe([...leadIds][0] as string)
  }, 60_000)

  test('a PAT revoked on one replica is refused on the other at once', async () => {
    const [first, second] = replicas
    const created = await api(first, 'POST', '/api/pat', sessionToken, { name: 'replicas' })
    expect(created.status).toBe(201)
    const { token, token_id: tokenId } = (await created.json()) as { token: string; token_id: string }
    // The token works on both replicas (and each has resolved it once).
    for (const replica of replicas) {
      expect((await api(replica, 'GET', '/api/webhook/sources', token)).status).toBe(200)
    }
    expect((await api(first, 'DELETE', `/api/pat/${tokenId}`, sessionToken)).status).toBe(204)
    // The very next request on the other replica, no waiting.
    const refused = await api(second, 'GET', '/api/webhook/sources', token)
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toStartWith('Bearer')
    expect(await refused.json()).toMatchObject({ error: 'invalid_token', request_id: expect.any(String) })
    expect((await api(first, 'GET', '/api/webhook/sources', token)).status).toBe(401)
  }, 30_000)

  test('a source disabled through one replica is 404 on the other within 1 s', async () => {
    const [first, second] = replicas
    const created = await api(first, 'POST', '/api/webhook/sources', sessionToken, { name: 'to disable' })
    expect(created.status).toBe(201)
    const { id, api_key: apiKey } = (await created.json()) as { id: string; api_key: string }
    // Both replicas have the source cached.
    for (const replica of replicas) {
      expect((await postLead(replica.url, apiKey, { email: uniqueEmail('before') })).status).toBe(200)
    }
    const clientIp = `198.18.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 254) + 1}`
    const patched = await api(first, 'PATCH', `/api/webhook/sources/${id}`, sessionToken, { enabled: false })
    expect(patched.status).toBe(200)
    const elapsed = await waitUntil(
      async () =>
        (
          await postLead(second.url, apiKey, { email: uniqueEmail('after') }, 5000, {
            'x-forwarded-for': clientIp,
          })
        ).status === 404,
      1000,
      'disabled source refused on the other replica',
    )
    expect(elapsed).toBeLessThanOrEqual(1000)
    const onFirst = await postLead(first.url, apiKey, { email: uniqueEmail('after') }, 5000, {
      'x-forwarded-for': clientIp,
    })
    expect(onFirst.status).toBe(404)
  }, 30_000)
})
