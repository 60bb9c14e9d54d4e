import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Webhook } from 'standardwebhooks'
import type { AppContext } from '../../src/context'
import { createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import { type ReceivedWebhook, startReceiver } from '../helpers/webhook-receiver'
import {
  cleanupAll,
  createTestDatabase,
  pool,
  postLead,
  type Replica,
  seedContext,
  spawnReplica,
  type TestDatabase,
  uniqueEmail,
  waitUntil,
} from './support'

/**
 * Outbound webhooks across real replica processes on one PostgreSQL: a replica killed mid-delivery,
 * two replicas sharing the queue, and where the signing secret may (not) be found. Needs real
 * services: PGlite cannot be shared between processes.
 */
const realServices = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL)
// Replicas sharing a database must share the key that seals the secrets.
const SECRETS_KEY = 'cmVsaWFiaWxpdHktdGVzdHMtd2ViaG9vay1rZXktMzI='
const TIMEOUT_MS = 2000

describe.skipIf(!realServices)('outbound webhooks across replicas', () => {
  let database: TestDatabase
  let ctx: AppContext
  let sessionToken: string
  let apiKey: string
  let organizationId: string
  let env: Record<string, string | undefined>
  const replicas: Replica[] = []

  const api = async (replica: Replica, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${replica.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${sessionToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    })
    const text = await response.text()
    return { status: response.status, body: text ? JSON.parse(text) : null }
  }
  const start = async () => {
    const replica = await spawnReplica({ env })
    replicas.push(replica)
    return replica
  }
  const alive = () =>
    replicas.filter((replica) => replica.process.exitCode === null && replica.process.signalCode === null)
  const statusOf = async (messageId: string) =>
    (await database.sql`select status from webhook_deliveries where message_id = ${messageId}`)[0]?.status

  beforeAll(async () => {
    database = await createTestDatabase()
    ctx = await seedContext(database.url)
    organizationId = (await createOrganization(ctx)).id
    const owner = await createUser(ctx, organizationId, { role: 'owner' })
    sessionToken = await createSession(ctx, owner.id)
    apiKey = (await createSource(ctx, organizationId)).apiKey
    env = {
      DATABASE_URL: database.url,
      REDIS_URL: process.env.REDIS_URL,
      DATABASE_POOL_SIZE: '4',
      LOG_LEVEL: 'debug',
      SHUTDOWN_DELAY_MS: '0',
      WEBHOOK_SECRETS_KEY: SECRETS_KEY,
      OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    }
  }, 60_000)

  afterAll(cleanupAll, 30_000)

  test('kill -9 mid-delivery: delivered after restart with the same webhook-id', async () => {
    let hold = true
    const receiver = startReceiver(() => (hold ? new Promise<Response>(() => {}) : new Response('ok')))
    try {
      const first = await start()
      const created = await api(first, 'POST', '/api/v2/webhook-endpoints', {
        url: receiver.url,
        event_types: ['lead.created'],
      })
      expect(created.status).toBe(201)
      const posted = await postLead(first.url, apiKey, { email: uniqueEmail('kill') })
      expect(posted.status).toBe(200)
      await waitUntil(() => receiver.received.length === 1, 5000, 'the first attempt')
      const messageId = receiver.received[0]!.headers['webhook-id']!
      expect(await first.kill()).not.toBe(0)
      hold = false

      const second = await start()
      // The dead replica's lease (time limit + 5 s) runs out, then the new one takes the delivery.
      await waitUntil(async () => (await statusOf(messageId)) === 'succeeded', 20_000, 'redelivery')
      expect(receiver.received.map((entry) => entry.headers['webhook-id'])).toEqual([messageId, messageId])
      for (const entry of receiver.received) {
        expect(new Webhook(created.body.secret).verify(entry.body, entry.headers)).toMatchObject({
          type: 'lead.created',
        })
      }
      await api(second, 'DELETE', `/api/v2/webhook-endpoints/${created.body.id}`)
    } finally {
      receiver.stop()
    }
  }, 60_000)

  test('SIGTERM mid-delivery: the attempt is handed back untried, and sent at once by the next replica', async () => {
    let hold = true
    const receiver = startReceiver(() => (hold ? new Promise<Response>(() => {}) : new Response('ok')))
    try {
      // This replica alone: another one, woken by its NOTIFY, could take the ping first.
      for (const other of alive()) expect(await other.stop()).toBe(0)
      const replica = await spawnReplica({ env: { ...env, SHUTDOWN_TIMEOUT_MS: '500' } })
      replicas.push(replica)
      const created = await api(replica, 'POST', '/api/v2/webhook-endpoints', { url: receiver.url })
      const queued = await api(replica, 'POST', `/api/v2/webhook-endpoints/${created.body.id}/test`)
      await waitUntil(() => receiver.received.length === 1, 5000, 'the first attempt')
      expect(await replica.stop()).toBe(0)
      // Released, not left to its lease: due now, the interrupted attempt not counted.
      const [row] =
        await database.sql`select status, attempt_count, claim_token, next_attempt_at <= now() as due
        from webhook_deliveries where message_id = ${queued.body.message_id}`
      expect(row).toEqual({ status: 'pending', attempt_count: 0, claim_token: null, due: true })
      hold = false
      await start()
      await waitUntil(
        async () => (await statusOf(queued.body.message_id)) === 'succeeded',
        10_000,
        'delivery',
      )
      expect(receiver.received.map((entry) => entry.headers['webhook-id'])).toEqual([
        queued.body.message_id,
        queued.body.message_id,
      ])
      await api(alive()[0]!, 'DELETE', `/api/v2/webhook-endpoints/${created.body.id}`)
    } finally {
      receiver.stop()
    }
  }, 60_000)

  test('two replicas: every message delivered, never twice at the same time, each within 5 s of its lead', async () => {
    const inFlight = new Map<string, number>()
    let overlaps = 0
    const receiver = startReceiver(async (entry: ReceivedWebhook) => {
      const id = entry.headers['webhook-id']!
      const now = (inFlight.get(id) ?? 0) + 1
      inFlight.set(id, now)
      if (now > 1) overlaps++
      await Bun.sleep(50)
      inFlight.set(id, inFlight.get(id)! - 1)
      return new Response('ok')
    })
    try {
      while (alive().length < 2) await start()
      const [a, b] = alive()
      const created = await api(a!, 'POST', '/api/v2/webhook-endpoints', {
        url: receiver.url,
        event_types: ['lead.created'],
      })
      expect(created.status).toBe(201)
      // A source of its own: 60 leads stay within its key's 60 per minute.
      const pairKey = (await createSource(ctx, organizationId)).apiKey
      const sentAt = new Map<string, number>()
      const results = await pool(
        Array.from({ length: 60 }, (_, index) => async () => {
          const posted = await postLead((index % 2 ? a : b)!.url, pairKey, { email: uniqueEmail('pair') })
          sentAt.set(posted.body?.lead_id as string, Date.now())
          return posted.status
        }),
        6,
      )
      expect(results.every((status) => status === 200)).toBe(true)
      await waitUntil(() => receiver.received.length >= 60, 15_000, 'sixty deliveries')
      await Bun.sleep(500)
      const ids = receiver.received.map((entry) => entry.headers['webhook-id'])
      expect(new Set(ids).size).toBe(60)
      expect(ids).toHaveLength(60)
      expect(overlaps).toBe(0)
      const lateness = receiver.received.map(
        (entry) => entry.at - sentAt.get((entry.json.data.lead as { lead_id: string }).lead_id)!,
      )
      expect(Math.max(...lateness)).toBeLessThan(5000)
    } finally {
      receiver.stop()
    }
  }, 90_000)

  test('the signing secret is in no database dump and no log line', async () => {
    const receiver = startReceiver()
    try {
      const replica = alive()[0] ?? (await start())
      const created = await api(replica, 'POST', '/api/v2/webhook-endpoints', { url: receiver.url })
      const rotated = await api(replica, 'POST', `/api/v2/webhook-endpoints/${created.body.id}/rotate-secret`)
      await api(replica, 'POST', `/api/v2/webhook-endpoints/${created.body.id}/test`)
      await waitUntil(() => receiver.received.length === 1, 5000, 'the ping')
      const dump = Bun.spawnSync(['pg_dump', '--data-only', database.url])
      expect(dump.exitCode).toBe(0)
      const text = dump.stdout.toString()
      expect(text).toContain(created.body.id)
      const logs = replicas.map((candidate) => candidate.output()).join('\n')
      expect(logs.length).toBeGreaterThan(0)
      for (const secret of [created.body.secret as string, rotated.body.secret as string]) {
        const body = secret.slice('whsec_'.length)
        expect(text.includes(body)).toBe(false)
        expect(text.includes(Buffer.from(body, 'base64').toString('hex'))).toBe(false)
        expect(logs.includes(body)).toBe(false)
      }
    } finally {
      receiver.stop()
    }
  }, 60_000)
})
