import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { deliveryLogs, leads, webhookSources } from '../../src/db/schema'
import { newId } from '../../src/lib/ids'
import { uniqueEmail } from '../helpers/emails'
import { BASE, contendWithOpenTransaction, createViaApi, ingestItem, setup } from '../helpers/sources'
import { call, request, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

// What goes with a deleted source or organization, also while leads are being written.

describe('deleting a source or an organization', () => {
  test('a deleted source keeps its leads (without a source) and takes its delivery logs', async () => {
    const { app, ctx, token, organization } = await setup()
    const created = await createViaApi(app, token)
    const address = uniqueEmail('kept')
    const posted = await app.handle(
      request('POST', `/api/webhook/lead/${created.api_key}`, { json: { email: address } }),
    )
    expect(posted.status).toBe(200)
    const { lead_id } = await posted.json()
    expect((await call(app, token, 'DELETE', `${BASE}/${created.id}`)).status).toBe(204)

    const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, lead_id))
    expect(lead).toMatchObject({
      id: lead_id,
      organizationId: organization.id,
      sourceId: null,
      email: address,
    })
    expect(await ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.sourceId, created.id))).toEqual([])
    const listed = await call(app, token, 'GET', `/api/v2/leads/${lead_id}`)
    expect(listed.status).toBe(200)
    expect(await listed.json()).toMatchObject({ lead_id, source_id: null, email: address })
  })

  // The guarantees the foreign keys used to give, under concurrency: needs a second connection.
  test.skipIf(!process.env.DATABASE_URL)(
    'a source deleted while a lead is being written for it waits for the write, then takes its log',
    async () => {
      const { app, ctx, token, organization } = await setup()
      const created = await createViaApi(app, token)
      const leadId = newId()
      const { outcome: deletion, settledBeforeCommit } = await contendWithOpenTransaction(
        async (transaction) => {
          const written = (await transaction.unsafe('select * from ingest_leads($1::jsonb)', [
            [ingestItem(organization.id, created.id, leadId)] as never,
          ])) as unknown as Array<Record<string, unknown>>
          expect([...written]).toEqual([
            {
              idx: 0,
              lead_id: leadId,
              outcome: 'created',
              webhook_events: false,
              remaining: 59,
              reset_ms: 60_000,
            },
          ])
        },
        () => call(app, token, 'DELETE', `${BASE}/${created.id}`),
      )
      expect(settledBeforeCommit).toBe(false)
      expect((await deletion).status).toBe(204)
      const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, leadId))
      expect(lead).toMatchObject({ id: leadId, sourceId: null })
      expect(await ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.sourceId, created.id))).toEqual(
        [],
      )
      // …and its rate-limit window (the lead counted against it).
      expect(
        await ctx.database.query('select source_id from inbound_rate_windows where source_id = $1', [
          created.id,
        ]),
      ).toEqual([])
    },
  )

  test.skipIf(!process.env.DATABASE_URL)(
    'a lead for a source whose deletion is not yet committed waits, then is refused and writes nothing',
    async () => {
      const { app, ctx, token, organization } = await setup()
      const created = await createViaApi(app, token)
      const leadId = newId()
      const { outcome: write, settledBeforeCommit } = await contendWithOpenTransaction(
        (transaction) => transaction.unsafe('delete from webhook_sources where id = $1', [created.id]),
        () =>
          ctx.database.query('select * from ingest_leads($1::jsonb)', [
            JSON.stringify([ingestItem(organization.id, created.id, leadId)]),
          ]),
      )
      expect(settledBeforeCommit).toBe(false)
      expect(await write).toEqual([])
      expect(await ctx.db.select().from(leads).where(eq(leads.id, leadId))).toEqual([])
      expect(await ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.sourceId, created.id))).toEqual(
        [],
      )
      expect((await call(app, token, 'GET', `${BASE}/${created.id}`)).status).toBe(404)
    },
  )

  test('a deleted organization takes its leads, sources and delivery logs', async () => {
    const { app, ctx, token, organization } = await setup()
    const created = await createViaApi(app, token)
    const posted = await app.handle(
      request('POST', `/api/webhook/lead/${created.api_key}`, {
        json: { email: uniqueEmail('gone') },
      }),
    )
    expect(posted.status).toBe(200)
    await ctx.database.query('delete from organizations where id = $1', [organization.id])
    expect(await ctx.db.select().from(leads).where(eq(leads.organizationId, organization.id))).toEqual([])
    expect(await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, created.id))).toEqual([])
    expect(await ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.sourceId, created.id))).toEqual([])
  })
})
