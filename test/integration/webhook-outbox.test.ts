import { beforeAll, describe, expect, test } from 'bun:test'
import { asc, eq, getTableColumns, sql } from 'drizzle-orm'
import postgres from 'postgres'
import type { AppContext } from '../../src/context'
import { sqlRows } from '../../src/db/rows'
import { deliveryLogs, webhookDeliveries, webhookMessages } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { ingestItem } from '../../src/modules/inbound/repository'
import type { CreateEndpointBody } from '../../src/modules/webhook-endpoints/model'
import { DeliveryQueueRepository, messageData } from '../../src/modules/webhook-endpoints/repository'
import { purgeExpiredMessages } from '../../src/modules/webhook-endpoints/retention'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { ingestConflictingGroup, leadWithEmail, requestFacts } from '../helpers/inbound'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

type App = Awaited<ReturnType<typeof makeTestApp>>['app']

const email = () => `lead-${crypto.randomUUID()}@example.com`
const post = (app: App, apiKey: string, json: unknown) =>
  app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { json }))

async function setup(endpoints: Array<Partial<CreateEndpointBody> | 'other-source'> = [{}]) {
  const clock = new FakeClock(Date.UTC(2026, 5, 1, 12))
  const { app, ctx, services } = await makeTestApp({ clock })
  // The fan-out takes every organization's lead events: earlier tests' are taken first, so the
  // counts below are this test's.
  while ((await fanOut(ctx)).messages > 0);
  const { organization, token } = await createSignedInUser(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, { name: 'Contact form' })
  const other = await createSource(ctx, organization.id, { name: 'Other form' })
  const created = []
  for (const endpoint of endpoints) {
    created.push(
      await createWebhookEndpoint(
        services,
        organization.id,
        endpoint === 'other-source' ? { source_ids: [other.source.id] } : endpoint,
      ),
    )
  }
  return { app, ctx, services, clock, organization, token, source, apiKey, other, endpoints: created }
}

/** The worker's fan-out step alone (drizzle/0019): the lead events' deliveries written. */
const fanOut = (ctx: AppContext, limit = 1000) => new DeliveryQueueRepository(ctx).fanOut(limit)

async function outboxOf(ctx: AppContext, organizationId: string) {
  // The lead events still in the fan-out queue (drizzle/0021): the queue keeps ids only, so the
  // organization's are found by its delivery logs (an event's id is its submission's log id), its
  // leads (a created lead's id is its event's: a deleted source takes its logs) and its messages.
  const queued = (
    await sqlRows<{ id: string }>(
      ctx.db,
      sql`select q.id from webhook_fan_out_queue q
        where exists (select 1 from delivery_logs d where d.id = q.id and d.organization_id = ${organizationId})
          or exists (select 1 from leads l where l.id = q.id and l.organization_id = ${organizationId})
          or exists (select 1 from webhook_messages m where m.id = q.id and m.organization_id = ${organizationId})
        order by q.id`,
    )
  ).map((row) => row.id)
  // Each message with its data as the worker sends it (a lead event's is rendered from its columns).
  const messages = await ctx.db
    .select({ ...getTableColumns(webhookMessages), payload: messageData })
    .from(webhookMessages)
    .where(eq(webhookMessages.organizationId, organizationId))
    .orderBy(asc(webhookMessages.id))
  const deliveries = await ctx.db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.organizationId, organizationId))
  return { queued, messages, deliveries }
}

describe('webhook outbox: lead events written with the lead', () => {
  test('lead.created: the lead as GET /api/v2/leads shows it, its source and its delivery-log id', async () => {
    const { app, ctx, clock, organization, token, source, apiKey, endpoints } = await setup()
    const response = await post(app, apiKey, {
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: email(),
      phone_raw: '+44 20 7946 0958',
      status: 'new',
      company: 'Engines',
    })
    const { lead_id: leadId } = await response.json()
    const lead = await (await call(app, token, 'GET', `/api/v2/leads/${leadId}`)).json()
    const [log] = await ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.leadId, leadId))
    // The lead's transaction queued the event by its id only (drizzle/0021); the worker's fan-out
    // writes its message (from the lead row) and the delivery, due at the event's time.
    expect(await outboxOf(ctx, organization.id)).toEqual({ queued: [log!.id], messages: [], deliveries: [] })
    clock.advance(5000)
    expect(await fanOut(ctx)).toEqual({ messages: 1, deliveries: 1 })
    const { queued, messages, deliveries } = await outboxOf(ctx, organization.id)
    expect(queued).toEqual([])
    expect(messages).toHaveLength(1)
    expect(messages[0]).toMatchObject({
      id: log!.id,
      eventType: 'lead.created',
      payload: { lead, source: { id: source.id, name: 'Contact form' }, delivery_log_id: log!.id },
      createdAt: new Date(clock.now() - 5000),
    })
    expect(await fanOut(ctx)).toEqual({ messages: 0, deliveries: 0 })
    expect(deliveries).toEqual([
      expect.objectContaining({
        messageId: log!.id,
        endpointId: endpoints[0]!.id,
        eventType: 'lead.created',
        status: 'pending',
        attemptCount: 0,
        nextAttemptAt: new Date(clock.now() - 5000),
        createdAt: new Date(clock.now() - 5000),
      }),
    ])
  })

  test('lead.updated carries the merged lead', async () => {
    const { app, ctx, organization, token, apiKey } = await setup()
    const address = email()
    const first = await (await post(app, apiKey, { email: address })).json()
    const second = await (
      await post(app, apiKey, { email: address, first_name: 'Grace', status: 'won' })
    ).json()
    expect(second).toMatchObject({ status: 'updated', lead_id: first.lead_id })
    const lead = await (await call(app, token, 'GET', `/api/v2/leads/${first.lead_id}`)).json()
    const { messages } = await outboxOf(ctx, organization.id)
    expect(messages.map((message) => message.eventType)).toEqual(['lead.created', 'lead.updated'])
    expect(messages[1]!.payload.lead).toEqual(lead)
    expect(lead).toMatchObject({ first_name: 'Grace', status: 'won' })
  })

  // The payload is built from the submission for a created lead and from the merge for an updated
  // one (drizzle/0015): pinned here on one group that does both, two of its items merging into the
  // same lead (one by e-mail, one by phone: distinct dedup keys, so the group is not refused).
  test('one group: a created lead and two merges into one lead, each payload the lead as GET shows it', async () => {
    const { app, ctx, clock, organization, token, source, apiKey } = await setup()
    const address = email()
    const phone = '+44 20 7946 0958'
    const existing = await (await post(app, apiKey, { email: address, phone_raw: phone })).json()
    clock.advance(1234)
    const created = email()
    const items = [
      ingestItem(
        source,
        {
          ...leadWithEmail(created),
          firstName: 'Ada',
          phoneRaw: '+1 415 555 0100',
          phoneE164: '+14155550100',
          status: 'new',
          customFields: { company: 'Engines', seats: 3 },
          attribution: { first_touch: { utm_source: 'news' } },
        },
        { ...requestFacts(), receivedAt: new Date(clock.now()) },
      ),
      ingestItem(
        source,
        { ...leadWithEmail(address), firstName: 'Grace' },
        { ...requestFacts(), receivedAt: new Date(clock.now()) },
      ),
      ingestItem(
        source,
        {
          ...leadWithEmail(''),
          email: null,
          emailNormalized: null,
          phoneRaw: phone,
          phoneE164: '+442079460958',
          status: 'won',
          customFields: { stage: 2 },
        },
        { ...requestFacts(), receivedAt: new Date(clock.now()) },
      ),
    ].map((item, idx) => ({ ...item, idx }))
    const rows = await ctx.database.query<{ idx: number; lead_id: string; outcome: string }>(
      'select idx, lead_id, outcome from ingest_leads($1::jsonb) order by idx',
      [JSON.stringify(items)],
    )
    expect(rows.map((row) => [row.outcome, row.lead_id === existing.lead_id])).toEqual([
      ['created', false],
      ['updated', true],
      ['updated', true],
    ])
    // Queued, the created lead's message is the fan-out's to write; the merges' are written already.
    const queued = await outboxOf(ctx, organization.id)
    expect(queued.queued).toEqual(expect.arrayContaining(items.map((item) => item.log_id)))
    expect(queued.messages.map((message) => message.id)).not.toContain(items[0]!.log_id)
    await fanOut(ctx)
    const { messages } = await outboxOf(ctx, organization.id)
    const byId = new Map(messages.map((message) => [message.id, message]))
    const lead = async (id: string) => (await call(app, token, 'GET', `/api/v2/leads/${id}`)).json()
    const merged = await lead(existing.lead_id)
    expect(merged).toMatchObject({ first_name: 'Grace', status: 'won', custom_fields: { stage: 2 } })
    expect(byId.get(items[0]!.log_id)).toMatchObject({
      eventType: 'lead.created',
      payload: { lead: await lead(rows[0]!.lead_id), source: { id: source.id, name: 'Contact form' } },
    })
    expect(byId.get(items[0]!.log_id)!.payload.lead).toEqual(await lead(rows[0]!.lead_id))
    for (const item of items.slice(1)) {
      expect(byId.get(item.log_id)!.eventType).toBe('lead.updated')
      expect(byId.get(item.log_id)!.payload).toEqual({
        lead: merged,
        source: { id: source.id, name: 'Contact form' },
        delivery_log_id: item.log_id,
      })
    }
  })

  // A lead event keeps its lead in columns (drizzle/0018) and its data is rendered when read: the
  // lead's own source and the submitting one are two columns, and the source's name is the one its
  // transaction read.
  test('lead.updated through another source: the lead keeps its source, the event names the one that sent it', async () => {
    const { app, ctx, organization, token, source, apiKey, other } = await setup()
    const address = email()
    const first = await (await post(app, apiKey, { email: address })).json()
    const second = await (await post(app, other.apiKey, { email: address, first_name: 'Grace' })).json()
    expect(second).toMatchObject({ status: 'updated', lead_id: first.lead_id })
    const lead = await (await call(app, token, 'GET', `/api/v2/leads/${first.lead_id}`)).json()
    expect(lead).toMatchObject({ source_id: source.id, first_name: 'Grace' })
    const { messages } = await outboxOf(ctx, organization.id)
    expect(messages[1]).toMatchObject({
      eventType: 'lead.updated',
      payload: {
        lead,
        source: { id: other.source.id, name: 'Other form' },
        delivery_log_id: messages[1]!.id,
      },
    })
  })

  test('a source renamed after its lead was stored: the event keeps the name it had', async () => {
    const { app, ctx, organization, token, source, apiKey } = await setup()
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    const renamed = await call(app, token, 'PATCH', `/api/webhook/sources/${source.id}`, {
      name: 'Renamed form',
    })
    expect(renamed.status).toBe(200)
    const { messages } = await outboxOf(ctx, organization.id)
    expect(messages[0]!.payload.source).toEqual({ id: source.id, name: 'Contact form' })
  })

  // A lead.created message does not copy its lead: it is rendered from the lead row until something
  // first writes that row, when the trigger leads_keep_event_snapshot copies it in. The class is
  // "every writer of leads": each one the product has, and a bare statement for any other.
  type Setup = Awaited<ReturnType<typeof setup>>
  const writers: Array<[string, (s: Setup, leadId: string, address: string) => Promise<void>]> = [
    [
      'a merge through the inbound route',
      async ({ app, apiKey }, leadId, address) => {
        const merged = await post(app, apiKey, { email: address, first_name: 'Grace', status: 'won' })
        expect(await merged.json()).toMatchObject({ status: 'updated', lead_id: leadId })
      },
    ],
    [
      "the API's edit",
      async ({ app, token }, leadId) => {
        const edited = await call(app, token, 'PATCH', `/api/v2/leads/${leadId}`, { status: 'qualified' })
        expect(edited.status).toBe(200)
      },
    ],
    [
      "the API's edit, twice",
      async ({ app, token }, leadId) => {
        for (const status of ['qualified', 'won']) {
          const edited = await call(app, token, 'PATCH', `/api/v2/leads/${leadId}`, { status })
          expect(edited.status).toBe(200)
        }
      },
    ],
    [
      "the API's delete",
      async ({ app, token }, leadId) => {
        expect((await call(app, token, 'DELETE', `/api/v2/leads/${leadId}`)).status).toBe(204)
      },
    ],
    [
      'its source deleted (the lead released: source_id null), then an edit',
      async ({ app, token, source }, leadId) => {
        expect((await call(app, token, 'DELETE', `/api/webhook/sources/${source.id}`)).status).toBe(204)
        const edited = await call(app, token, 'PATCH', `/api/v2/leads/${leadId}`, { first_name: 'Edited' })
        expect(edited.status).toBe(200)
      },
    ],
    [
      'a bare UPDATE that leaves updated_at alone',
      async ({ ctx }, leadId) => {
        await ctx.db.execute(sql`UPDATE leads SET custom_fields = '{"x": 1}' WHERE id = ${leadId}`)
      },
    ],
  ]
  // Each writer before the worker's fan-out (the event still queued: the trigger writes the message
  // with the copy) and after it (the fan-out's message: the trigger fills the copy in).
  for (const [label, write] of writers) {
    for (const fannedOut of [false, true])
      test(`lead.created after ${label}, ${fannedOut ? 'after' : 'before'} the fan-out: the lead as it was created`, async () => {
        const s = await setup()
        const address = email()
        const response = await post(s.app, s.apiKey, {
          first_name: 'Ada',
          email: address,
          status: 'new',
          company: 'Engines',
        })
        const { lead_id: leadId } = await response.json()
        const asCreated = await (await call(s.app, s.token, 'GET', `/api/v2/leads/${leadId}`)).json()
        // Not copied on the lead path: the event is its id in the queue, with no message yet.
        expect(await outboxOf(s.ctx, s.organization.id)).toMatchObject({ queued: [leadId], messages: [] })
        if (fannedOut) {
          expect(await fanOut(s.ctx)).toEqual({ messages: 1, deliveries: 1 })
          // The fan-out's message has the lead's id and no lead columns of its own: the lead row is it.
          const [before] = (await outboxOf(s.ctx, s.organization.id)).messages
          expect(before).toMatchObject({ id: leadId, leadId, leadFirstName: null, leadCreatedAt: null })
          expect(before!.payload.lead).toEqual(asCreated)
        }

        await write(s, leadId, address)

        // Whichever came first, the fan-out sends the message as the trigger left it.
        if (!fannedOut) {
          // (a merge queues its own lead.updated beside it)
          const { queued } = await outboxOf(s.ctx, s.organization.id)
          expect(queued[0]).toBe(leadId)
          expect(await fanOut(s.ctx)).toEqual({ messages: queued.length, deliveries: queued.length })
        }
        const [after] = (await outboxOf(s.ctx, s.organization.id)).messages
        expect(after).toMatchObject({
          id: leadId,
          eventType: 'lead.created',
          leadFirstName: 'Ada',
          leadCreatedAt: new Date(asCreated.created_at),
          payload: {
            lead: asCreated,
            source: { id: s.source.id, name: 'Contact form' },
            delivery_log_id: leadId,
          },
        })
      })
  }

  // [label, endpoints, deliveries expected, whether the worker is woken (an enabled endpoint exists)]
  const filters: Array<[string, Array<Partial<CreateEndpointBody> | 'other-source'>, number, boolean]> = [
    ['no endpoint', [], 0, false],
    ['a disabled endpoint', [{ enabled: false }], 0, false],
    ['an endpoint for other event types', [{ event_types: ['lead.updated', 'ping'] }], 0, true],
    ["an endpoint for another source's leads", ['other-source'], 0, true],
    ['an endpoint for every event', [{ event_types: [] }], 1, true],
    ['an endpoint for lead.created', [{ event_types: ['lead.created'] }], 1, true],
    [
      'two endpoints and a disabled one',
      [{}, { event_types: ['lead.created'] }, { enabled: false }],
      2,
      true,
    ],
  ]
  for (const [label, endpoints, expected, woken] of filters) {
    test(`${label}: ${expected} deliveries (one message when any)`, async () => {
      const { app, ctx, services, organization, apiKey } = await setup(endpoints)
      let wakes = 0
      services.deliverySignal.subscribe(() => wakes++)
      expect((await post(app, apiKey, { email: email() })).status).toBe(200)
      expect((await outboxOf(ctx, organization.id)).queued).toHaveLength(expected > 0 ? 1 : 0)
      expect(await fanOut(ctx)).toEqual({ messages: expected > 0 ? 1 : 0, deliveries: expected })
      const { queued, messages, deliveries } = await outboxOf(ctx, organization.id)
      expect(queued).toEqual([])
      expect(messages).toHaveLength(expected > 0 ? 1 : 0)
      expect(deliveries).toHaveLength(expected)
      // The worker is woken only when the organization has an enabled endpoint.
      expect(wakes).toBe(woken ? 1 : 0)
    })
  }

  test('a group of leads in one turn: one message each, in one transaction', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => post(app, apiKey, { email: email() })),
    )
    const leadIds = await Promise.all(responses.map(async (response) => (await response.json()).lead_id))
    expect(await fanOut(ctx)).toEqual({ messages: 20, deliveries: 20 })
    const { messages, deliveries } = await outboxOf(ctx, organization.id)
    expect(messages.map((message) => (message.payload.lead as { lead_id: string }).lead_id).sort()).toEqual(
      leadIds.sort(),
    )
    expect(deliveries).toHaveLength(20)
  })

  test("another organization's endpoints never get this organization's leads", async () => {
    const { app, ctx, services, apiKey } = await setup([])
    const other = await createSignedInUser(ctx)
    await createWebhookEndpoint(services, other.organization.id)
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    await fanOut(ctx)
    expect((await outboxOf(ctx, other.organization.id)).deliveries).toHaveLength(0)
  })

  test('a group that rolls back writes no event', async () => {
    const { ctx, organization, source } = await setup()
    const refused = await ingestConflictingGroup(ctx, organization.id, source.id)
    expect(refused).toMatchObject({ code: 'LC409' })
    const { queued, messages, deliveries } = await outboxOf(ctx, organization.id)
    expect({ queued: queued.length, messages: messages.length, deliveries: deliveries.length }).toEqual({
      queued: 0,
      messages: 0,
      deliveries: 0,
    })
  })

  // The fan-out runs after the lead's commit (drizzle/0019): each endpoint is taken as it was at the
  // event's time (drizzle/0020), whatever happened to it between the commit and the fan-out.
  type Change = (s: Awaited<ReturnType<typeof setup>>, endpointId: string) => Promise<unknown>
  const patch =
    (enabled: boolean): Change =>
    async ({ services, organization }, endpointId) =>
      services.webhookEndpoints.update(organization.id, endpointId, { enabled })
  const cases: Array<[string, { before?: Change[]; after?: Change[] }, string | null]> = [
    ['enabled throughout', {}, 'pending'],
    [
      'disabled since the event: it waits, as its pending deliveries do',
      { after: [patch(false)] },
      'pending',
    ],
    ['disabled and enabled again since', { after: [patch(false), patch(true)] }, 'pending'],
    ['disabled at the event, enabled since', { before: [patch(false)], after: [patch(true)] }, null],
    ['disabled at the event and since', { before: [patch(false)] }, null],
    ['enabled again before the event', { before: [patch(false), patch(true)] }, 'pending'],
    [
      'disabled for failing five days since: failed, as its pending ones became',
      {
        after: [
          async ({ ctx, clock }, endpointId) => {
            await ctx.db.execute(
              sql`update webhook_endpoints set failing_since = ${new Date(clock.now() - 6 * 86_400_000).toISOString()}::timestamptz
                  where id = ${endpointId}::uuid`,
            )
            return new DeliveryQueueRepository(ctx).disableIfFailingSince(
              endpointId,
              new Date(clock.now() - 5 * 86_400_000),
              new Date(clock.now()),
            )
          },
        ],
      },
      'failed',
    ],
  ]
  for (const [label, { before = [], after = [] }, expected] of cases) {
    test(`the endpoint as it was at the event: ${label}`, async () => {
      // Two endpoints: the other one, enabled throughout, makes every lead write its event.
      const setupResult = await setup([{}, {}])
      const { app, ctx, clock, organization, apiKey, endpoints } = setupResult
      const endpointId = endpoints[1]!.id
      for (const change of before) {
        await change(setupResult, endpointId)
        clock.advance(1000)
      }
      expect((await post(app, apiKey, { email: email() })).status).toBe(200)
      for (const change of after) {
        clock.advance(1000)
        await change(setupResult, endpointId)
      }
      await fanOut(ctx)
      const { deliveries } = await outboxOf(ctx, organization.id)
      const status = (id: string) => deliveries.find((delivery) => delivery.endpointId === id)?.status ?? null
      expect(status(endpoints[0]!.id)).toBe('pending')
      expect(status(endpointId)).toBe(expected)
    })
  }

  test('an endpoint created after the event gets nothing', async () => {
    const { app, ctx, services, clock, organization, apiKey, endpoints } = await setup()
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    clock.advance(1000)
    const later = await createWebhookEndpoint(services, organization.id)
    expect(await fanOut(ctx)).toEqual({ messages: 1, deliveries: 1 })
    const { deliveries } = await outboxOf(ctx, organization.id)
    expect(deliveries.map((delivery) => delivery.endpointId)).toEqual([endpoints[0]!.id])
    expect(later.id).not.toBe(endpoints[0]!.id)
  })

  test("an endpoint's disabled spells: one opened per disable, closed per enable, none older than retention kept", async () => {
    const { ctx, services, clock, organization, endpoints } = await setup()
    const id = endpoints[0]!.id
    const spells = async () =>
      (await services.webhookEndpoints.repository.findById(organization.id, id))!.pauses
    const at = () => new Date(clock.now()).toISOString()
    const toggle = async (enabled: boolean) => {
      clock.advance(1000)
      await services.webhookEndpoints.update(organization.id, id, { enabled })
      return at()
    }
    const off1 = await toggle(false)
    // Setting it as it is changes nothing.
    await toggle(false)
    const on1 = await toggle(true)
    await toggle(true)
    const times = (list: Array<[string, string | null]>) =>
      list.map(([from, until]) => [new Date(from).toISOString(), until && new Date(until).toISOString()])
    expect(times(await spells())).toEqual([[off1, on1]])
    clock.advance((ctx.config.logRetentionDays + 1) * 86_400_000)
    const off2 = await toggle(false)
    expect(times(await spells())).toEqual([[off2, null]])
  })

  test('created disabled: disabled from its creation', async () => {
    const { app, ctx, services, clock, organization, apiKey } = await setup()
    const off = await createWebhookEndpoint(services, organization.id, { enabled: false })
    clock.advance(1000)
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    clock.advance(1000)
    await services.webhookEndpoints.update(organization.id, off.id, { enabled: true })
    await fanOut(ctx)
    const { deliveries } = await outboxOf(ctx, organization.id)
    expect(deliveries.some((delivery) => delivery.endpointId === off.id)).toBe(false)
  })

  test('oldest first, at most the limit per statement, each message once', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    for (let i = 0; i < 5; i++) expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    const { queued } = await outboxOf(ctx, organization.id)
    expect(queued).toHaveLength(5)
    expect(await fanOut(ctx, 2)).toEqual({ messages: 2, deliveries: 2 })
    let { deliveries } = await outboxOf(ctx, organization.id)
    expect(deliveries.map((delivery) => delivery.messageId).sort()).toEqual(queued.slice(0, 2))
    expect((await outboxOf(ctx, organization.id)).queued).toEqual(queued.slice(2))
    // Concurrent fan-outs (two replicas' workers): SKIP LOCKED shares the rest, none twice.
    const shares = await Promise.all([fanOut(ctx, 2), fanOut(ctx, 2), fanOut(ctx, 2)])
    expect(shares.reduce((sum, share) => sum + share.messages, 0)).toBe(3)
    ;({ deliveries } = await outboxOf(ctx, organization.id))
    expect(deliveries.map((delivery) => delivery.messageId).sort()).toEqual(queued)
  })

  // The trigger and the fan-out writing one event's message at once (PostgreSQL only: PGlite runs
  // one statement at a time). The lead's first write holds its transaction open after the trigger
  // wrote the message with the copy; the fan-out, which read the queue before that commit, waits on
  // the message's key, then leaves the trigger's row as it is and writes the delivery.
  test.skipIf(!process.env.DATABASE_URL)(
    "a fan-out racing the lead's first write: the event is the lead as it was created",
    async () => {
      const { app, ctx, organization, token, apiKey } = await setup()
      const { lead_id: leadId } = await (
        await post(app, apiKey, { email: email(), first_name: 'Ada' })
      ).json()
      const asCreated = await (await call(app, token, 'GET', `/api/v2/leads/${leadId}`)).json()
      const writer = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} })
      try {
        let fanning: ReturnType<typeof fanOut> | undefined
        let settledEarly = false
        await writer.begin(async (tx) => {
          await tx`update leads set first_name = 'Edited', updated_at = now() where id = ${leadId}`
          fanning = fanOut(ctx)
          void fanning.then(() => {
            settledEarly = true
          })
          await Bun.sleep(300)
        })
        // It waited for the writer's commit…
        expect(settledEarly).toBe(false)
        expect(await fanning!).toEqual({ messages: 1, deliveries: 1 })
      } finally {
        await writer.end()
      }
      // …and the event is the lead as created, not as edited.
      const { queued, messages, deliveries } = await outboxOf(ctx, organization.id)
      expect(queued).toEqual([])
      expect(deliveries.map((delivery) => delivery.messageId)).toEqual([leadId])
      expect(messages.map((message) => message.payload.lead)).toEqual([asCreated])
      expect((await (await call(app, token, 'GET', `/api/v2/leads/${leadId}`)).json()).first_name).toBe(
        'Edited',
      )
    },
  )

  // A queued event whose organization is gone: its lead went with it (the trigger wrote the message
  // first), its endpoints too, so the fan-out takes it off the queue and delivers nothing.
  test('an organization deleted while its events are queued: the fan-out drops them', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const { lead_id: leadId } = await (await post(app, apiKey, { email: email() })).json()
    expect((await outboxOf(ctx, organization.id)).queued).toEqual([leadId])
    await ctx.database.query('delete from organizations where id = $1', [organization.id])
    expect(await fanOut(ctx)).toEqual({ messages: 1, deliveries: 0 })
    expect(await outboxOf(ctx, organization.id)).toMatchObject({ queued: [], deliveries: [] })
  })

  // The name a lead event gives its source is the one it had when the lead was stored: a rename or
  // a delete before the fan-out writes the queued events' messages with it.
  for (const change of ['renamed', 'deleted'] as const)
    test(`a source ${change} while its lead's event is queued: delivered with the name it had`, async () => {
      const { app, ctx, organization, token, source, apiKey } = await setup()
      const { lead_id: leadId } = await (await post(app, apiKey, { email: email() })).json()
      const asCreated = await (await call(app, token, 'GET', `/api/v2/leads/${leadId}`)).json()
      expect((await outboxOf(ctx, organization.id)).queued).toEqual([leadId])
      const changed =
        change === 'renamed'
          ? await call(app, token, 'PATCH', `/api/webhook/sources/${source.id}`, { name: 'Renamed form' })
          : await call(app, token, 'DELETE', `/api/webhook/sources/${source.id}`)
      expect(changed.status).toBe(change === 'renamed' ? 200 : 204)
      expect(await fanOut(ctx)).toEqual({ messages: 1, deliveries: 1 })
      const { queued, messages, deliveries } = await outboxOf(ctx, organization.id)
      expect(queued).toEqual([])
      expect(deliveries.map((delivery) => delivery.messageId)).toEqual([leadId])
      expect(messages).toHaveLength(1)
      expect(messages[0]!.payload).toEqual({
        lead: asCreated,
        source: { id: source.id, name: 'Contact form' },
        delivery_log_id: leadId,
      })
    })

  // Queued events with a message already: an updated lead's (written with it) and the created
  // lead's (written by the trigger before the merge changed the lead).
  test('retention never deletes a lead event that is not fanned out yet, whatever its age', async () => {
    const { app, ctx, clock, organization, apiKey } = await setup()
    const address = email()
    expect((await post(app, apiKey, { email: address })).status).toBe(200)
    expect((await post(app, apiKey, { email: address, first_name: 'Grace' })).status).toBe(200)
    const before = await outboxOf(ctx, organization.id)
    expect(before.queued).toHaveLength(2)
    expect(before.messages.map((message) => message.id)).toEqual(before.queued)
    clock.advance((ctx.config.logRetentionDays + 1) * 24 * 3_600_000)
    await purgeExpiredMessages(ctx)
    expect((await outboxOf(ctx, organization.id)).messages).toHaveLength(2)
    expect(await fanOut(ctx)).toEqual({ messages: 2, deliveries: 2 })
  })
})
