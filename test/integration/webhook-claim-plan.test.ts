import { beforeAll, describe, expect, test } from 'bun:test'
import { type SQL, sql } from 'drizzle-orm'
import { PgDialect } from 'drizzle-orm/pg-core'
import type { AppContext } from '../../src/context'
import { sqlRows } from '../../src/db/rows'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import {
  CLAIM_PLANNER_SETTINGS,
  claimStatement,
  fanOutStatement,
  recordStatement,
} from '../../src/modules/webhook-endpoints/repository'
import { createSignedInUser, createWebhookEndpoint } from '../helpers/factories'
import { explainAnalyze, nodesReading, type PlanNode, planOf } from '../helpers/query-plans'
import { makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** Lead events waiting for one endpoint, as a saturated replica leaves them (docs/webhooks.md). */
const BACKLOG = 20_000
const CLAIM_LIMIT = 32

/** Every node of a plan that read `relation`, with the rows it produced in all its loops. */
const reads = (relation: string, node: PlanNode) =>
  nodesReading(relation, node).map((read) => ({
    node: read['Node Type'],
    rows: read['Actual Rows'] * read['Actual Loops'],
  }))
const deliveryReads = (node: PlanNode) => reads('webhook_deliveries', node)

/**
 * EXPLAIN ANALYZE of `statement` as the drivers end up running it: a named prepared statement on its
 * generic plan (postgres.js and Bun.sql prepare the worker's statements, and after a few runs
 * PostgreSQL keeps the plan made without the parameters' values, which estimates a LIMIT $1 at a
 * guess). An unnamed statement gets a plan for its values, which can hide what the generic one does.
 */
async function explainGenericPlan(db: AppContext['db'], statement: SQL, settings?: SQL): Promise<PlanNode> {
  const query = new PgDialect().sqlToQuery(statement)
  const types = query.params.map((param) => (typeof param === 'number' ? 'int' : 'text'))
  const values = query.params.map((param) => (typeof param === 'number' ? String(param) : `'${param}'`))
  return db.transaction(async (tx) => {
    if (settings) await tx.execute(settings)
    await tx.execute(sql.raw('set local plan_cache_mode = force_generic_plan'))
    await tx.execute(sql.raw(`prepare generic_plan_check(${types.join(', ')}) as ${query.sql}`))
    try {
      const [row] = await sqlRows<{ 'QUERY PLAN': unknown }>(
        tx,
        sql.raw(`explain (analyze, format json) execute generic_plan_check(${values.join(', ')})`),
      )
      return planOf(row)
    } finally {
      await tx.execute(sql.raw('deallocate generic_plan_check'))
    }
  })
}

// The claim runs every 10-100 ms on a connection the lead path shares. Its cost must follow what it
// takes, not the backlog: a plan chosen on statistics from before a burst (the table grows by
// thousands of rows a second; autovacuum analyses it a minute later, or never where it is off)
// hashed every due delivery to find the endpoints with one, ~12 ms per claim at 50,000.
// Both plans the drivers run it on: the one made for its values (a statement's first runs) and the
// generic one PostgreSQL keeps after them (which once hashed the chosen rows against a scan of
// every delivery to update them by `ctid`). The results of the claimed batch are recorded the same
// way, on the plan the test names.
describe('the delivery claim and its results read what they take, whatever the statistics say', () => {
  for (const statistics of ['taken before the backlog', 'taken with the backlog'] as const) {
    for (const priorityOnly of [false, true])
      for (const plan of ['custom', 'generic'] as const) {
        test(`statistics ${statistics}, ${priorityOnly ? 'priority claim' : 'full claim'}, ${plan} plan`, async () => {
          const explain = plan === 'generic' ? explainGenericPlan : explainAnalyze
          // Long before any other test's clock: only this test's deliveries are due.
          const clock = new FakeClock(Date.UTC(2002, 0, 1))
          const { ctx, services } = await makeTestApp({ clock })
          const { organization } = await createSignedInUser(ctx)
          const endpoint = await createWebhookEndpoint(services, organization.id)
          // Removed whatever happens: a failed test's deliveries would be due at the next one's claim.
          try {
            const at = new Date(clock.now() - 60_000).toISOString()
            // Lead events never attempted; the priority claim's share of them is the retries (every
            // hundredth attempted once before).
            const addBacklog = (count: number) =>
              ctx.db.execute(sql`
          with messages as (
            insert into webhook_messages (id, organization_id, event_type, payload, created_at)
            select gen_random_uuid(), ${organization.id}::uuid, 'lead.created', '{}'::jsonb,
              ${at}::timestamptz + n * interval '1 ms'
            from generate_series(1, ${count}::int) n
            returning id, created_at
          )
          insert into webhook_deliveries (message_id, endpoint_id, organization_id, event_type, next_attempt_at,
            created_at, attempt_count, last_attempt_at)
          select m.id, ${endpoint.id}::uuid, ${organization.id}::uuid, 'lead.created', m.created_at, m.created_at,
            case when row_number() over (order by m.id) % 100 = 0 then 1 else 0 end,
            case when row_number() over (order by m.id) % 100 = 0 then m.created_at end
          from messages m`)
            // Before: statistics of a twentieth of it (as the planner-statistics job or autovacuum
            // leave them at the start of a burst), then the rest.
            if (statistics === 'taken before the backlog') {
              await addBacklog(BACKLOG / 20)
              await ctx.db.execute(sql`analyze webhook_deliveries`)
              await addBacklog(BACKLOG - BACKLOG / 20)
            } else {
              await addBacklog(BACKLOG)
              await ctx.db.execute(sql`analyze webhook_deliveries`)
            }

            const options = {
              now: new Date(clock.now()),
              leaseUntil: new Date(clock.now() + 20_000),
              token: newId(),
              limit: CLAIM_LIMIT,
              perEndpoint: CLAIM_LIMIT,
              inFlight: {},
              priorityOnly,
            }
            // The claim finds the endpoints with pending deliveries by one probe each: on a database
            // kept between runs, other tests' endpoints with pending deliveries add up run after run.
            const [pending] = await sqlRows<{ endpoints: number }>(
              ctx.db,
              sql`select count(distinct endpoint_id)::int as endpoints from webhook_deliveries where status = 'pending'`,
            )
            const mostRead = Math.max(2 * CLAIM_LIMIT, pending!.endpoints + 1)
            // in its transaction with its settings, as DeliveryQueueRepository.claim runs it
            const top =
              plan === 'generic'
                ? await explainGenericPlan(ctx.db, claimStatement(options), CLAIM_PLANNER_SETTINGS)
                : await ctx.db.transaction(async (tx) => {
                    await tx.execute(CLAIM_PLANNER_SETTINGS)
                    return explainAnalyze(tx, claimStatement(options))
                  })
            // It claimed a full batch (EXPLAIN ANALYZE runs the update)…
            expect(top['Actual Rows']).toBe(CLAIM_LIMIT)
            // …and no step of it read more deliveries than a batch and the one probe per endpoint.
            const reads = deliveryReads(top)
            expect(reads.length).toBeGreaterThan(0)
            expect(reads.filter((read) => read.rows > mostRead)).toEqual([])
            const claimed = await sqlRows<{ endpoint_id: string; message_id: string }>(
              ctx.db,
              sql`select endpoint_id, message_id from webhook_deliveries where claim_token = ${options.token}::uuid`,
            )
            expect(claimed.length).toBe(CLAIM_LIMIT)
            // Their results, as the worker records a batch of them: half delivered, half to retry.
            const attemptedAt = new Date(clock.now())
            const results = claimed.map((delivery, index) => ({
              delivery,
              token: options.token,
              outcome: {
                attemptedAt,
                responseStatus: index % 2 === 0 ? 200 : 503,
                durationMs: 12,
                responseBody: null,
                error: null,
                succeeded: index % 2 === 0,
                nextAttemptAt: index % 2 === 0 ? null : new Date(clock.now() + 5_000),
              },
            }))
            const recorded = await explain(ctx.db, recordStatement(results))
            expect(recorded['Actual Rows']).toBe(CLAIM_LIMIT)
            expect(deliveryReads(recorded).filter((read) => read.rows > 2 * CLAIM_LIMIT)).toEqual([])
            const [after] = await sqlRows<{ succeeded: number; pending: number; attempts: number }>(
              ctx.db,
              sql`select count(*) filter (where status = 'succeeded')::int as succeeded,
                count(*) filter (where status = 'pending' and claim_token is null
                  and last_attempt_at = ${attemptedAt.toISOString()}::timestamptz)::int as pending,
                (select count(*) from webhook_attempts where endpoint_id = ${endpoint.id}::uuid)::int as attempts
              from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid`,
            )
            expect(after).toEqual({
              succeeded: CLAIM_LIMIT / 2,
              pending: CLAIM_LIMIT / 2,
              attempts: CLAIM_LIMIT,
            })
          } finally {
            await ctx.db.execute(sql`delete from webhook_endpoints where id = ${endpoint.id}::uuid`)
            await ctx.db.execute(
              sql`delete from webhook_messages where organization_id = ${organization.id}::uuid`,
            )
          }
        }, 60_000)
      }
  }
})

// The fan-out (drizzle/0019, its queue since 0021) runs at every claim too, next to tables that keep
// every message for LOG_RETENTION_DAYS and every lead: it must read the lead events it takes (a
// LIMIT over the queue's key, a key lookup of each one's message and lead), never the messages or
// leads of events fanned out long ago.
describe('the fan-out reads what it takes, whatever the statistics say', () => {
  const DONE = 20_000
  const QUEUED = 20_000
  const FAN_OUT_LIMIT = 32
  for (const statistics of ['taken before the backlog', 'taken with the backlog'] as const)
    for (const plan of ['custom', 'generic'] as const) {
      test(`statistics ${statistics}, ${plan} plan`, async () => {
        const explain = plan === 'generic' ? explainGenericPlan : explainAnalyze
        const clock = new FakeClock(Date.UTC(2002, 0, 1))
        const { ctx, services } = await makeTestApp({ clock })
        const { organization } = await createSignedInUser(ctx)
        await createWebhookEndpoint(services, organization.id)
        // after the endpoint's creation, which takes only events from then on
        const at = new Date(clock.now()).toISOString()
        // Created leads and their events: fanned out long ago (a message each, nothing queued) or
        // waiting in the queue (the lead only: the fan-out writes the message). The queue's backlog is
        // as large as the rest: a saturated spell leaves hundreds of thousands, and a plan that read
        // all of them for each batch would make the drain quadratic (a small queue is read whole,
        // rightly: a few pages).
        const addEvents = (count: number, queued: boolean) =>
          ctx.db.execute(sql`
          with added as (
            select gen_random_uuid() as id, ${at}::timestamptz + n * interval '1 ms' as at
            from generate_series(1, ${count}::int) n
          ), leads_added as (
            insert into leads (id, organization_id, email, email_normalized, created_at, updated_at)
            select id, ${organization.id}::uuid, id || '@example.com', id || '@example.com', at, at from added
          ), messages_added as (
            insert into webhook_messages (id, organization_id, event_type, created_at, lead_id)
            select id, ${organization.id}::uuid, 'lead.created', at, id from added where not ${queued}::boolean
          )
          insert into webhook_fan_out_queue (id) select id from added where ${queued}::boolean`)
        await addEvents(DONE, false)
        if (statistics === 'taken before the backlog') {
          await ctx.db.execute(sql`analyze webhook_messages`)
          await ctx.db.execute(sql`analyze leads`)
          await ctx.db.execute(sql`analyze webhook_fan_out_queue`)
          await addEvents(QUEUED, true)
        } else {
          await addEvents(QUEUED, true)
          await ctx.db.execute(sql`analyze webhook_messages`)
          await ctx.db.execute(sql`analyze leads`)
          await ctx.db.execute(sql`analyze webhook_fan_out_queue`)
        }
        // Other tests' lead events would be taken too (the fan-out is every organization's): only
        // this test's are left queued.
        await ctx.db.execute(
          sql`delete from webhook_fan_out_queue q
            where not exists (select 1 from leads l where l.id = q.id and l.organization_id = ${organization.id}::uuid)`,
        )
        const top = await explain(ctx.db, fanOutStatement(FAN_OUT_LIMIT))
        for (const relation of ['webhook_fan_out_queue', 'webhook_messages', 'leads']) {
          const found = reads(relation, top)
          expect({ relation, read: found.length > 0 }).toEqual({ relation, read: true })
          expect(found.filter((read) => read.rows > 2 * FAN_OUT_LIMIT)).toEqual([])
        }
        // EXPLAIN ANALYZE ran it: a batch taken, its messages written, one delivery each.
        const [left] = await sqlRows<{ queued: number; messages: number; deliveries: number }>(
          ctx.db,
          sql`select (select count(*) from webhook_fan_out_queue)::int as queued,
            (select count(*) from webhook_messages where organization_id = ${organization.id}::uuid)::int as messages,
            (select count(*) from webhook_deliveries where organization_id = ${organization.id}::uuid)::int as deliveries`,
        )
        expect(left).toEqual({
          queued: QUEUED - FAN_OUT_LIMIT,
          messages: DONE + FAN_OUT_LIMIT,
          deliveries: FAN_OUT_LIMIT,
        })
        await ctx.db.execute(
          sql`delete from webhook_endpoints where organization_id = ${organization.id}::uuid`,
        )
        await ctx.db.execute(sql`delete from webhook_fan_out_queue`)
        await ctx.db.execute(
          sql`delete from webhook_messages where organization_id = ${organization.id}::uuid`,
        )
        await ctx.db.execute(sql`delete from leads where organization_id = ${organization.id}::uuid`)
      }, 60_000)
    }
})
