import { beforeAll, describe, expect, test } from 'bun:test'
import { type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { sqlRows } from '../../src/db/rows'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import { claimStatement, fanOutStatement } from '../../src/modules/webhook-endpoints/repository'
import { createSignedInUser, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** Lead events waiting for one endpoint, as a saturated replica leaves them (docs/webhooks.md). */
const BACKLOG = 20_000
const CLAIM_LIMIT = 32

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Actual Rows': number
  'Actual Loops': number
  Plans?: PlanNode[]
}

/** Every node of a plan that read `relation`, with the rows it produced in all its loops. */
function reads(
  relation: string,
  node: PlanNode,
  found: Array<{ node: string; rows: number }> = [],
): Array<{ node: string; rows: number }> {
  if (node['Relation Name'] === relation && node['Node Type'] !== 'ModifyTable')
    found.push({ node: node['Node Type'], rows: node['Actual Rows'] * node['Actual Loops'] })
  for (const child of node.Plans ?? []) reads(relation, child, found)
  return found
}
const deliveryReads = (node: PlanNode) => reads('webhook_deliveries', node)

async function explainAnalyze(ctx: AppContext, statement: SQL): Promise<PlanNode> {
  const [row] = await sqlRows<{ 'QUERY PLAN': unknown }>(
    ctx.db,
    sql`explain (analyze, format json) ${statement}`,
  )
  const plan = (
    typeof row!['QUERY PLAN'] === 'string' ? JSON.parse(row!['QUERY PLAN']) : row!['QUERY PLAN']
  ) as Array<{ Plan: PlanNode }>
  return plan[0]!.Plan
}

// The claim runs every 10-100 ms on a connection the lead path shares. Its cost must follow what it
// takes, not the backlog: a plan chosen on statistics from before a burst (the table grows by
// thousands of rows a second; autovacuum analyses it a minute later, or never where it is off)
// hashed every due delivery to find the endpoints with one, ~12 ms per claim at 50,000.
describe('the delivery claim reads what it takes, whatever the statistics say', () => {
  for (const statistics of ['taken before the backlog', 'taken with the backlog'] as const) {
    for (const priorityOnly of [false, true]) {
      test(`statistics ${statistics}, ${priorityOnly ? 'priority claim' : 'full claim'}`, async () => {
        // Long before any other test's clock: only this test's deliveries are due.
        const clock = new FakeClock(Date.UTC(2002, 0, 1))
        const { ctx, services } = await makeTestApp({ clock })
        const { organization } = await createSignedInUser(ctx)
        const endpoint = await createWebhookEndpoint(services, organization.id)
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
        const top = await explainAnalyze(ctx, claimStatement(options))
        // It claimed a full batch (EXPLAIN ANALYZE runs the update)…
        expect(top['Actual Rows']).toBe(CLAIM_LIMIT)
        // …and no step of it read more deliveries than a batch and the one probe per endpoint.
        const reads = deliveryReads(top)
        expect(reads.length).toBeGreaterThan(0)
        expect(reads.filter((read) => read.rows > 2 * CLAIM_LIMIT)).toEqual([])
        await ctx.db.execute(sql`delete from webhook_endpoints where id = ${endpoint.id}::uuid`)
        await ctx.db.execute(
          sql`delete from webhook_messages where organization_id = ${organization.id}::uuid`,
        )
      }, 60_000)
    }
  }
})

// The fan-out (drizzle/0019) runs at every claim too, over a table that keeps every message for
// LOG_RETENTION_DAYS: it must read the lead events it takes, never the messages already fanned out.
describe('the fan-out reads what it takes, whatever the statistics say', () => {
  const DONE = 20_000
  const FAN_OUT_LIMIT = 32
  for (const statistics of ['taken before the backlog', 'taken with the backlog'] as const) {
    test(`statistics ${statistics}`, async () => {
      const clock = new FakeClock(Date.UTC(2002, 0, 1))
      const { ctx, services } = await makeTestApp({ clock })
      const { organization } = await createSignedInUser(ctx)
      await createWebhookEndpoint(services, organization.id)
      const at = new Date(clock.now() - 60_000).toISOString()
      const addMessages = (count: number, pending: boolean) =>
        ctx.db.execute(sql`
          insert into webhook_messages (id, organization_id, event_type, payload, created_at, fan_out_pending)
          select gen_random_uuid(), ${organization.id}::uuid, 'lead.created', '{}'::jsonb,
            ${at}::timestamptz + n * interval '1 ms', ${pending}::boolean
          from generate_series(1, ${count}::int) n`)
      await addMessages(DONE, false)
      if (statistics === 'taken before the backlog') {
        await ctx.db.execute(sql`analyze webhook_messages`)
        await addMessages(DONE / 10, true)
      } else {
        await addMessages(DONE / 10, true)
        await ctx.db.execute(sql`analyze webhook_messages`)
      }
      // Other tests' lead events would be taken too (the fan-out is every organization's): only
      // this test's are left pending.
      await ctx.db.execute(
        sql`update webhook_messages set fan_out_pending = false
            where fan_out_pending and organization_id <> ${organization.id}::uuid`,
      )
      const top = await explainAnalyze(ctx, fanOutStatement(FAN_OUT_LIMIT))
      const messageReads = reads('webhook_messages', top)
      expect(messageReads.length).toBeGreaterThan(0)
      expect(messageReads.filter((read) => read.rows > 2 * FAN_OUT_LIMIT)).toEqual([])
      // EXPLAIN ANALYZE ran it: a batch taken, one delivery each.
      const [left] = await sqlRows<{ n: number }>(
        ctx.db,
        sql`select count(*)::int as n from webhook_messages
            where organization_id = ${organization.id}::uuid and fan_out_pending`,
      )
      expect(Number(left!.n)).toBe(DONE / 10 - FAN_OUT_LIMIT)
      await ctx.db.execute(
        sql`delete from webhook_endpoints where organization_id = ${organization.id}::uuid`,
      )
      await ctx.db.execute(sql`delete from webhook_messages where organization_id = ${organization.id}::uuid`)
    }, 60_000)
  }
})
