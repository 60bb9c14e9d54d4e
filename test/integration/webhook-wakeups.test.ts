import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { type AppContext, createContext } from '../../src/context'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { createMemoryLogger } from '../../src/lib/logger'
import { DELIVERY_CHANNEL, NOTIFY_COALESCE_MS } from '../../src/modules/webhook-endpoints/signal'
import {
  IN_FLIGHT_PER_ENDPOINT,
  POLL_INTERVAL_MS,
  workerStatementSlots,
} from '../../src/modules/webhook-endpoints/worker'
import { buildServices, type Services } from '../../src/services'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp, request, testConfig, testDatabase, usingRealServices } from '../helpers/test-app'
import { startReceiver } from '../helpers/webhook-receiver'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/**
 * A second replica in this process: a context on a database handle of its own (its own pool and its
 * own listener connection, as another process would have), on the same PostgreSQL.
 */
async function secondReplica(
  env: Record<string, string> = {},
): Promise<{ ctx: AppContext; database: DatabaseHandle; services: Services }> {
  const config = testConfig(env)
  const database = await openDatabase(config)
  const ctx = await createContext(config, {
    database,
    logger: createMemoryLogger('debug'),
    rateLimitKeyPrefix: `rl:test:${crypto.randomUUID()}:`,
  })
  cleanups.push(async () => {
    await ctx.close()
    await database.close()
  })
  return { ctx, database, services: buildServices(ctx) }
}

async function listeningConnections(ctx: AppContext): Promise<number> {
  const [row] = await ctx.database.query<{ count: number }>(
    `select count(*)::int as count from pg_stat_activity
     where datname = current_database() and query ilike 'listen %'`,
    [],
  )
  return row!.count
}

/**
 * Wake-ups across replicas (PostgreSQL only: embedded PGlite is one process, whose only worker is
 * woken in process). No poll runs in these tests (the periodic jobs are not started), so a delivery
 * that only the second replica can make is made only if the NOTIFY woke it.
 */
describe.skipIf(!usingRealServices)('webhook wake-ups across replicas (LISTEN/NOTIFY)', () => {
  test(`replica B delivers what replica A wrote but cannot send (A at its cap of ${IN_FLIGHT_PER_ENDPOINT}), without waiting for a poll`, async () => {
    const a = await makeTestApp()
    const { organization } = await createSignedInUser(a.ctx)
    const { apiKey } = await createSource(a.ctx, organization.id)
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    // Every request is held: A's worker fills its per-endpoint cap and frees no slot, so what is
    // beyond it can only be sent by B.
    const receiver = startReceiver(() => gate.then(() => new Response('ok')))
    cleanups.push(() => receiver.stop())
    await createWebhookEndpoint(a.services, organization.id, {
      url: receiver.url,
      event_types: ['lead.created'],
    })

    const workerA = a.services.deliveryWorker
    await workerA.start()
    cleanups.push(() => workerA.stop(5000))
    const before = await listeningConnections(a.ctx)

    const b = await secondReplica()
    await b.services.sourceCache.listen()
    const workerB = b.services.deliveryWorker
    await workerB.start()
    cleanups.push(() => workerB.stop(5000))
    cleanups.push(() => release())
    // One LISTEN connection for the replica, however many channels it listens to.
    expect(await listeningConnections(a.ctx)).toBe(before + 1)

    // A's NOTIFYs as a third party sees them (on B's listener connection too).
    const notices: number[] = []
    await b.database.listen(DELIVERY_CHANNEL, () => notices.push(performance.now()))

    const total = IN_FLIGHT_PER_ENDPOINT + 8
    const acknowledged = new Map<string, number>()
    const burstStarted = performance.now()
    for (let index = 0; index < total; index++) {
      const response = await a.app.handle(
        request('POST', `/api/webhook/lead/${apiKey}`, {
          json: { email: `wake-${index}-${crypto.randomUUID()}@example.com` },
        }),
      )
      expect(response.status).toBe(200)
      acknowledged.set(((await response.json()) as { lead_id: string }).lead_id, Date.now())
    }
    const burstMs = performance.now() - burstStarted

    // Only this test's events: a port the kernel hands out again may get an old test's retry.
    const ours = () =>
      receiver.received.filter((entry) =>
        acknowledged.has((entry.json.data.lead as { lead_id?: string } | undefined)?.lead_id ?? ''),
      )
    const deadline = Date.now() + 10_000
    while (ours().length < total && Date.now() < deadline) await Bun.sleep(10)
    expect(ours()).toHaveLength(total)
    expect(new Set(ours().map((entry) => entry.headers['webhook-id'])).size).toBe(total)
    const lags = ours().map(
      (entry) => entry.at - acknowledged.get((entry.json.data.lead as { lead_id: string }).lead_id)!,
    )
    const worst = Math.max(...lags)
    console.log(
      `wake-ups across replicas: ${total} events, worst lag ${worst} ms (poll interval ${POLL_INTERVAL_MS} ms, not running here); ${notices.length} NOTIFYs over a ${Math.round(burstMs)} ms burst`,
    )
    // The bound on delivery; without a NOTIFY the events beyond A's cap never arrive here.
    expect(worst).toBeLessThan(5000)
    // Coalesced: at most one per window (and the trailing one), never one per lead.
    expect(notices.length).toBeGreaterThanOrEqual(1)
    expect(notices.length).toBeLessThanOrEqual(Math.ceil((burstMs + 1000) / NOTIFY_COALESCE_MS) + 1)
  }, 60_000)
})

describe.skipIf(!usingRealServices)("the delivery worker's share of the pool", () => {
  test(`with DATABASE_POOL_SIZE 4 a worker holds at most ${workerStatementSlots(4)} connection through a burst`, async () => {
    const { ctx, services } = await makeTestApp()
    const { organization } = await createSignedInUser(ctx)
    const receiver = startReceiver()
    cleanups.push(() => receiver.stop())
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: receiver.url })
    const service = services.webhookEndpoints
    for (let index = 0; index < 150; index++) await service.ping(organization.id, endpoint.id)
    const [{ started }] = (await ctx.database.query<{ started: string }>(
      'select now()::text as started',
      [],
    )) as [{ started: string }]
    // A replica whose pool serves only its worker here: postgres.js opens a connection only when a
    // statement finds none free, so the connections it opened are the most it used at once.
    const replica = await secondReplica({ DATABASE_POOL_SIZE: '4' })
    const worker = replica.services.deliveryWorker
    await worker.deliverDue()
    expect(receiver.received).toHaveLength(150)
    const [{ opened }] = (await ctx.database.query<{ opened: number }>(
      `select count(*)::int as opened from pg_stat_activity
       where datname = current_database() and backend_start >= $1::timestamptz and pid <> pg_backend_pid()`,
      [started],
    )) as [{ opened: number }]
    expect(opened).toBeGreaterThanOrEqual(1)
    expect(opened).toBeLessThanOrEqual(workerStatementSlots(4))
  })
})
