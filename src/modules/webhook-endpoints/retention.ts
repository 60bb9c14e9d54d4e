import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'

const DAY_MS = 24 * 3_600_000
const BATCH_SIZE = 5000

/**
 * Outbound messages are kept as long as delivery logs (LOG_RETENTION_DAYS): older deliveries that
 * are no longer pending go with their attempts (foreign key), then messages no delivery refers to
 * any more (also those of deleted endpoints and organizations). A pending delivery is never
 * deleted, whatever its age, unless its endpoint is gone: a group of ingest_leads() that read the
 * endpoint before its delete and committed after it leaves one behind (no foreign key since
 * drizzle/0015, the delete trigger cannot see it), and nothing would ever send it. Bounded batches
 * keep each statement short; replicas that purge at the same time only find less to delete.
 */
export async function purgeExpiredMessages(
  ctx: AppContext,
  now = ctx.clock.now(),
  options: { shouldStop?: () => boolean } = {},
): Promise<{ deliveries: number; messages: number }> {
  const cutoff = new Date(now - ctx.config.logRetentionDays * DAY_MS).toISOString()
  let deliveries = 0
  let messages = 0
  for (;;) {
    const rows = await sqlRows<{ n: number }>(
      ctx.db,
      sql`with gone as (
         delete from webhook_deliveries where ctid in (
           select ctid from webhook_deliveries d
           where d.created_at < ${cutoff}::timestamptz
             and (d.status <> 'pending'
               or not exists (select 1 from webhook_endpoints e where e.id = d.endpoint_id))
           limit ${BATCH_SIZE})
         returning 1)
       select count(*)::int as n from gone`,
    )
    const deleted = Number(rows[0]?.n ?? 0)
    deliveries += deleted
    if (deleted < BATCH_SIZE || options.shouldStop?.()) break
  }
  for (;;) {
    const rows = await sqlRows<{ n: number }>(
      ctx.db,
      sql`with gone as (
         delete from webhook_messages where id in (
           select m.id from webhook_messages m
           where m.created_at < ${cutoff}::timestamptz
             -- A lead event the worker has not fanned out yet is as pending as a delivery: an updated
             -- lead's message, or one a trigger wrote, while its id waits in the fan-out queue.
             and not exists (select 1 from webhook_fan_out_queue q where q.id = m.id)
             -- A delivery's created_at is its message's, so the loop above took every old one
             -- but the pending ones of live endpoints: those are found through the organization's
             -- endpoints and the deliveries' key (no index on message_id alone, drizzle/0016: it
             -- cost every lead event a b-tree insert for this query only).
             and not exists (
               select 1 from webhook_endpoints e
               join webhook_deliveries d on d.endpoint_id = e.id and d.message_id = m.id
               where e.organization_id = m.organization_id)
           limit ${BATCH_SIZE})
         returning 1)
       select count(*)::int as n from gone`,
    )
    const deleted = Number(rows[0]?.n ?? 0)
    messages += deleted
    if (deleted < BATCH_SIZE || options.shouldStop?.()) break
  }
  return { deliveries, messages }
}
