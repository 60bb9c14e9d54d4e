import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { and, eq, inArray, sql } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { sqlRows } from '../../src/db/rows'
import { webhookDeliveries, webhookEndpoints } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import { InboundPressure, PRESSURE_ENTER_LEADS } from '../../src/modules/inbound/pressure'
import {
  DEFERRED_CLAIM_INTERVAL_MS,
  DEFERRED_LEAD_BATCH_INTERVAL_MS,
  DEFERRED_LEAD_EVENTS_PER_SECOND,
  RETRY_SCHEDULE_MS,
} from '../../src/modules/webhook-endpoints/worker'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'
import { startReceiver } from '../helpers/webhook-receiver'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Leads waiting in the group commit, enough for a second: the lead path is saturated. */
const SATURATED = 4 * PRESSURE_ENTER_LEADS

/**
 * A service on a fake clock (lead events are due at their lead's time, so deliveries other test
 * files left in a shared database, due on another clock, are not claimed here), an endpoint with a
 * real receiver, a source. The worker is driven by hand (deliverDue, as the poll does).
 */
async function setup(reply?: Parameters<typeof startReceiver>[0], env?: Record<string, string>) {
  // Earlier than any other test file's clock: deliveries other files left pending in a shared
  // database are never due here, and never take the floor's budget.
  const clock = new FakeClock(Date.UTC(2001, 5, 1))
  const { app, ctx, services } = await makeTestApp({ clock, env })
  const { organization, token } = await createSignedInUser(ctx)
  const receiver = startReceiver(reply)
  const worker = services.deliveryWorker
  cleanups.push(() => receiver.stop())
  cleanups.push(() => worker.stop(0))
  const endpoint = await createWebhookEndpoint(services, organization.id, { url: receiver.url })
  // Its deliveries go with it: a backlog left pending here would be due for the next run's clock.
  // So do its lead events still queued: on this early clock they would be the oldest in the queue
  // and take the floor's budget of the next test (or the next run on a reused database).
  cleanups.push(async () => {
    await ctx.db.delete(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id))
    await ctx.db.execute(sql`delete from webhook_fan_out_queue q
      where exists (select 1 from leads l where l.id = q.id and l.organization_id = ${organization.id})`)
  })
  const { apiKey, source } = await createSource(ctx, organization.id, { name: 'Site' })
  const postLeads = async (count: number) => {
    const ids: string[] = []
    for (let index = 0; index < count; index++) {
      const response = await app.handle(
        request('POST', `/api/webhook/lead/${apiKey}`, {
          json: { email: `p${index}-${newId()}@example.com` },
        }),
      )
      expect(response.status).toBe(200)
      ids.push(((await response.json()) as { lead_id: string }).lead_id)
      // Apart: the claim's order (next_attempt_at) is then the order they came in, and a second
      // apart the source's key stays under its limit of 60 a minute (a floor batch is 100).
      clock.advance(1_001)
    }
    return ids
  }
  const pressure = services.inboundPressure
  /** As the group commit reports it: `SATURATED` leads waiting for a second, or none for a second. */
  const saturate = (on: boolean) => {
    pressure.add(on ? SATURATED : -SATURATED)
    clock.advance(1_000)
    expect(pressure.underPressure()).toBe(on)
  }
  return {
    app,
    ctx,
    services,
    organization,
    token,
    clock,
    receiver,
    worker,
    endpoint,
    source,
    postLeads,
    saturate,
  }
}

/** The lead a lead.created body carries. */
const leadIdOf = (entry: ReturnType<typeof startReceiver>['received'][number]) =>
  (entry.json.data.lead as { lead_id: string }).lead_id

const leadEvents = (received: ReturnType<typeof startReceiver>['received']) =>
  received.filter((entry) => entry.json.type === 'lead.created')

async function pendingOf(ctx: AppContext, endpointId: string) {
  return ctx.db
    .select()
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.status, 'pending')))
}

async function notFannedOut(ctx: AppContext, organizationId: string): Promise<number> {
  // The queue keeps ids only (drizzle/0021): the organization's are its delivery logs' ids.
  const [row] = await sqlRows<{ n: number }>(
    ctx.db,
    sql`select count(*)::int as n from webhook_fan_out_queue q
      where exists (select 1 from delivery_logs d where d.id = q.id and d.organization_id = ${organizationId})`,
  )
  return row?.n ?? 0
}

describe('inbound first: a saturated replica defers lead events to a floor rate', () => {
  test('under pressure the worker sends lead events at its floor only, and everything once the pressure is gone', async () => {
    const { ctx, clock, organization, receiver, worker, endpoint, postLeads, saturate } = await setup()
    const perInterval = (DEFERRED_LEAD_EVENTS_PER_SECOND * DEFERRED_LEAD_BATCH_INTERVAL_MS) / 1000
    const total = perInterval + 30
    const leads = await postLeads(total)
    saturate(true)

    // The floor starts empty when a saturated spell begins: nothing yet.
    await worker.deliverDue()
    expect(leadEvents(receiver.received)).toHaveLength(0)
    // Claims a tick later take no lead event: the floor sends them a whole batch at a time, once
    // per batch interval (each batch walks the heads of the queue and the due index).
    clock.advance(DEFERRED_CLAIM_INTERVAL_MS)
    await worker.deliverDue()
    expect(leadEvents(receiver.received)).toHaveLength(0)

    // One batch interval of the floor later: that many, oldest first, no more (claimed over the next
    // ticks: an endpoint takes IN_FLIGHT_PER_ENDPOINT at a time).
    clock.advance(DEFERRED_LEAD_BATCH_INTERVAL_MS - DEFERRED_CLAIM_INTERVAL_MS)
    await worker.deliverDue()
    for (let tick = 0; tick < 8; tick++) {
      clock.advance(DEFERRED_CLAIM_INTERVAL_MS / 2)
      await worker.deliverDue()
    }
    const firstBatch = leadEvents(receiver.received)
    expect(firstBatch).toHaveLength(perInterval)
    // The oldest (the floor takes the queue in id order); they are sent at once, so they may
    // arrive in any order.
    expect(firstBatch.map((entry) => leadIdOf(entry)).sort()).toEqual(leads.slice(0, perInterval).sort())
    // Only the floor's share was fanned out to deliveries (drizzle/0019): the rest wait in the queue.
    expect(await pendingOf(ctx, endpoint.id)).toHaveLength(0)
    expect(await notFannedOut(ctx, organization.id)).toBe(total - perInterval)
    // The batch's budget is spent: claims before the next interval send none.
    clock.advance(DEFERRED_CLAIM_INTERVAL_MS)
    await worker.deliverDue()
    expect(leadEvents(receiver.received)).toHaveLength(perInterval)

    // The saturation ends: the rest goes at the next claim, whatever the floor's budget.
    saturate(false)
    await worker.deliverDue()
    const all = leadEvents(receiver.received)
    expect(all).toHaveLength(total)
    // Each lead's event exactly once, with its message id as webhook-id on the wire.
    expect(all.map((entry) => leadIdOf(entry)).sort()).toEqual([...leads].sort())
    const ids = all.map((entry) => entry.headers['webhook-id']!)
    expect(new Set(ids).size).toBe(total)
    for (const entry of all)
      expect(entry.headers['webhook-id']).toBe(entry.json.data.delivery_log_id as string)
    expect(await pendingOf(ctx, endpoint.id)).toHaveLength(0)
    expect(await notFannedOut(ctx, organization.id)).toBe(0)
    const succeeded = await ctx.db
      .select({ id: webhookDeliveries.messageId, attempts: webhookDeliveries.attemptCount })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.endpointId, endpoint.id), inArray(webhookDeliveries.messageId, ids)))
    expect(succeeded).toHaveLength(total)
    expect(succeeded.every((row) => row.attempts === 1)).toBe(true)
  })

  test('WEBHOOK_INBOUND_FIRST=false: under the same pressure every lead event goes at once', async () => {
    const { receiver, worker, postLeads, saturate } = await setup(undefined, {
      WEBHOOK_INBOUND_FIRST: 'false',
    })
    await postLeads(30)
    saturate(true)
    await worker.deliverDue()
    expect(leadEvents(receiver.received)).toHaveLength(30)
  })

  test('the floor keeps the backlog moving however long the saturation lasts', async () => {
    const { receiver, clock, worker, postLeads, saturate } = await setup()
    const perInterval = (DEFERRED_LEAD_EVENTS_PER_SECOND * DEFERRED_LEAD_BATCH_INTERVAL_MS) / 1000
    const total = 2 * perInterval + perInterval / 2
    await postLeads(total)
    saturate(true)
    await worker.deliverDue()
    // Every batch interval of a saturated spell sends the floor's share, oldest first, until none is
    // left; the claims between them send none.
    // A batch goes out once per batch interval, its claims spread over the ticks after it (an
    // endpoint takes IN_FLIGHT_PER_ENDPOINT at a time): halfway through each interval, every earlier
    // batch and no more.
    const ticks = DEFERRED_LEAD_BATCH_INTERVAL_MS / DEFERRED_CLAIM_INTERVAL_MS
    for (let interval = 1; interval <= 3; interval++) {
      for (let tick = 0; tick < ticks; tick++) {
        clock.advance(DEFERRED_CLAIM_INTERVAL_MS)
        await worker.deliverDue()
        if (tick === ticks / 2 - 1)
          expect(leadEvents(receiver.received)).toHaveLength(Math.min(total, (interval - 1) * perInterval))
      }
    }
    for (let tick = 0; tick < ticks / 2; tick++) {
      clock.advance(DEFERRED_CLAIM_INTERVAL_MS)
      await worker.deliverDue()
    }
    expect(leadEvents(receiver.received)).toHaveLength(total)
  })

  // What a saturated replica still sends at once, ahead of the lead events' backlog.
  test.each<[string, (s: Awaited<ReturnType<typeof setup>>) => Promise<string>]>([
    [
      'a ping (POST …/test)',
      async ({ app, token, endpoint }) => {
        const response = await call(app, token, 'POST', `/api/v2/webhook-endpoints/${endpoint.id}/test`)
        expect(response.status).toBe(202)
        return ((await response.json()) as { message_id: string }).message_id
      },
    ],
    [
      'a source.status_changed alert',
      async ({ services, organization, source, clock }) => {
        const id = newId()
        const queued = await services.webhookEndpoints.enqueue({
          id,
          organizationId: organization.id,
          type: 'source.status_changed',
          sourceId: source.id,
          data: {
            source: { id: source.id, name: 'Site' },
            previous_status: 'healthy',
            status: 'failing',
            health: {},
          },
          createdAt: new Date(clock.now()),
        })
        expect(queued).toBe(1)
        return id
      },
    ],
  ])('%s goes at once while lead events wait', async (_name, queue) => {
    const setupResult = await setup()
    const { receiver, worker, postLeads, saturate } = setupResult
    await postLeads(20)
    saturate(true)
    const messageId = await queue(setupResult)
    await worker.deliverDue()
    expect(receiver.received.map((entry) => entry.headers['webhook-id'])).toEqual([messageId])
    expect(leadEvents(receiver.received)).toHaveLength(0)
  })

  test("a lead event's retry goes at once while first attempts wait", async () => {
    let failFirst = true
    const { receiver, clock, worker, postLeads, saturate } = await setup(() => {
      if (!failFirst) return new Response('ok')
      failFirst = false
      return new Response('down', { status: 500 })
    })
    const [first] = await postLeads(1)
    await worker.deliverDue()
    expect(receiver.received).toHaveLength(1)
    await postLeads(20)
    saturate(true)
    // The retry comes due (after the schedule's first wait) while the lead path is still saturated.
    clock.advance(RETRY_SCHEDULE_MS[0])
    await worker.deliverDue()
    expect(receiver.received).toHaveLength(2)
    const retry = receiver.received[1]!
    expect(leadIdOf(retry)).toBe(first!)
    expect(retry.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id'])
  })
})

describe('inbound first: the group commit reports the leads waiting', () => {
  test('every lead queued is counted while it waits and uncounted once answered', async () => {
    class RecordingPressure extends InboundPressure {
      counted = 0
      most = 0
      override add(delta: number): void {
        super.add(delta)
        this.counted += delta
        this.most = Math.max(this.most, this.counted)
      }
    }
    const clock = new FakeClock(Date.UTC(2024, 5, 1))
    const pressure = new RecordingPressure(clock)
    const { app, ctx } = await makeTestApp({ clock, parts: () => ({ inboundPressure: pressure }) })
    const { organization } = await createSignedInUser(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, index) =>
        app.handle(
          request('POST', `/api/webhook/lead/${apiKey}`, { json: { email: `w${index}@example.com` } }),
        ),
      ),
    )
    expect(responses.map((response) => response.status)).toEqual(Array(12).fill(200))
    // Sent in one turn, they waited together; all answered, none is counted any more.
    expect(pressure.most).toBeGreaterThan(1)
    expect(pressure.counted).toBe(0)
  })
})
