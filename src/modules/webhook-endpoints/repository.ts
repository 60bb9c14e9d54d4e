import { and, count, desc, eq, inArray, lt, max, type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import type { Database } from '../../db/client'
import { sqlRows } from '../../db/rows'
import {
  webhookAttempts,
  webhookDeliveries,
  webhookEndpoints,
  webhookMessages,
  webhookSources,
} from '../../db/schema'
import { newId } from '../../lib/ids'
import type { SecretBox } from '../../lib/secrets'
import type { EventType, MessageStatus } from './model'

/**
 * A message's `data` as it is sent. A lead event keeps its lead in columns (drizzle/0018), rendered
 * by webhook_message_payload() (drizzle/functions); every other event is its stored payload.
 */
export const messageData = sql<Record<string, unknown>>`webhook_message_payload(${webhookMessages})`

export type EndpointRow = typeof webhookEndpoints.$inferSelect
export type NewEndpointRow = typeof webhookEndpoints.$inferInsert
export type EndpointChanges = Partial<
  Pick<
    NewEndpointRow,
    | 'url'
    | 'description'
    | 'eventTypes'
    | 'sourceIds'
    | 'enabled'
    | 'disabledReason'
    | 'failingSince'
    | 'updatedAt'
  >
>
export type AttemptRow = typeof webhookAttempts.$inferSelect

export interface DeliveryStats {
  pending: number
  succeeded: number
  failed: number
  lastAttemptAt: Date | null
}

export interface MessageRow {
  id: string
  eventType: string
  status: string
  attemptCount: number
  nextAttemptAt: Date
  createdAt: Date
  payload: Record<string, unknown>
}

/** An event to write: its message and one delivery per subscribed endpoint. */
export interface NewEvent {
  id: string
  organizationId: string
  type: EventType
  data: Record<string, unknown>
  createdAt: Date
  /** Only endpoints that take leads of this source (the `source_ids` filter). */
  sourceId?: string
  /** Only this endpoint (a ping), whatever its event filter. */
  endpointId?: string
  /** Every endpoint but this one (the announcement that it was disabled). */
  exceptEndpointId?: string
}

const ATTEMPTS_SHOWN = 20

/** Drizzle queries on webhook endpoints and their messages, always scoped to an organization. */
export class WebhookEndpointsRepository {
  constructor(private readonly ctx: AppContext) {}

  async findById(organizationId: string, id: string): Promise<EndpointRow | null> {
    const [row] = await this.ctx.db
      .select()
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
    return row ?? null
  }

  list(organizationId: string, options: { limit: number; beforeId?: string }): Promise<EndpointRow[]> {
    const conditions = [eq(webhookEndpoints.organizationId, organizationId)]
    if (options.beforeId) conditions.push(lt(webhookEndpoints.id, options.beforeId))
    return this.ctx.db
      .select()
      .from(webhookEndpoints)
      .where(and(...conditions))
      .orderBy(desc(webhookEndpoints.id))
      .limit(options.limit + 1)
  }

  async countForOrganization(organizationId: string): Promise<number> {
    const [row] = await this.ctx.db
      .select({ total: count() })
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.organizationId, organizationId))
    return row?.total ?? 0
  }

  /** The ids among `ids` that name sources of the organization. */
  async existingSourceIds(organizationId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const rows = await this.ctx.db
      .select({ id: webhookSources.id })
      .from(webhookSources)
      .where(and(eq(webhookSources.organizationId, organizationId), inArray(webhookSources.id, ids)))
    return new Set(rows.map((row) => row.id))
  }

  async insert(row: NewEndpointRow): Promise<EndpointRow> {
    const [inserted] = await this.ctx.db.insert(webhookEndpoints).values(row).returning()
    return inserted!
  }

  async update(organizationId: string, id: string, changes: EndpointChanges): Promise<EndpointRow | null> {
    const pauses =
      changes.enabled === undefined || changes.updatedAt === undefined
        ? {}
        : { pauses: pausesAfter(changes.enabled, changes.updatedAt, this.ctx.config.logRetentionDays) }
    const [row] = await this.ctx.db
      .update(webhookEndpoints)
      .set({ ...changes, ...pauses })
      .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
      .returning()
    return row ?? null
  }

  /** The new sealed secret in; the current one becomes the previous one until `previousExpiresAt`. */
  async rotateSecret(
    organizationId: string,
    id: string,
    secret: { sealed: string; previousExpiresAt: Date; now: Date },
  ): Promise<EndpointRow | null> {
    const [row] = await this.ctx.db
      .update(webhookEndpoints)
      .set({
        secretCiphertext: secret.sealed,
        previousSecretCiphertext: sql`${webhookEndpoints.secretCiphertext}`,
        previousSecretExpiresAt: secret.previousExpiresAt,
        updatedAt: secret.now,
      })
      .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
      .returning()
    return row ?? null
  }

  /**
   * Every endpoint's secrets (current and previous; one organization's with `organizationId`) sealed
   * again with the box's current key, for a rotation of WEBHOOK_SECRETS_KEY (docs/webhooks.md). Row
   * by row, each write only if the row still holds what was read (a rotation meanwhile seals with the
   * current key anyway, and is counted as changed). A secret that opens with none of the keys is left
   * as it is and its endpoint listed: the others are still resealed. `updated_at` is left alone:
   * nothing an API user sees changes.
   */
  async resealSecrets(
    box: SecretBox,
    organizationId?: string,
  ): Promise<{ endpoints: number; resealed: number; changedMeanwhile: number; unreadable: string[] }> {
    const rows = await this.sealedSecrets()
      .where(organizationId ? eq(webhookEndpoints.organizationId, organizationId) : undefined)
      .orderBy(webhookEndpoints.id)
    let resealed = 0
    let changedMeanwhile = 0
    const unreadable: string[] = []
    for (const row of rows) {
      let secret: string | null
      let previous: string | null
      try {
        secret = box.reseal(row.secret)
        previous = row.previous === null ? null : box.reseal(row.previous)
      } catch {
        unreadable.push(row.id)
        continue
      }
      if (secret === null && previous === null) continue
      const written = await this.ctx.db
        .update(webhookEndpoints)
        .set({ secretCiphertext: secret ?? row.secret, previousSecretCiphertext: previous ?? row.previous })
        .where(
          and(
            eq(webhookEndpoints.id, row.id),
            eq(webhookEndpoints.secretCiphertext, row.secret),
            sql`${webhookEndpoints.previousSecretCiphertext} is not distinct from ${row.previous}`,
          ),
        )
        .returning({ id: webhookEndpoints.id })
      if (written.length > 0) resealed++
      else changedMeanwhile++
    }
    return { endpoints: rows.length, resealed, changedMeanwhile, unreadable }
  }

  /**
   * Which of up to `limit` endpoints' secrets open with `box` (the newest endpoints first): the
   * start-up check of the key (secrets-key-check.ts). Only the sealed text is read.
   */
  async secretsOpening(box: SecretBox, limit: number): Promise<{ checked: number; unopened: string[] }> {
    const rows = await this.sealedSecrets().orderBy(desc(webhookEndpoints.id)).limit(limit)
    const unopened: string[] = []
    for (const row of rows) {
      try {
        box.open(row.secret)
        if (row.previous !== null) box.open(row.previous)
      } catch {
        unopened.push(row.id)
      }
    }
    return { checked: rows.length, unopened }
  }

  /** Every endpoint's id and sealed secrets (the current, a rotation's previous): a query to narrow. */
  private sealedSecrets() {
    return this.ctx.db
      .select({
        id: webhookEndpoints.id,
        secret: webhookEndpoints.secretCiphertext,
        previous: webhookEndpoints.previousSecretCiphertext,
      })
      .from(webhookEndpoints)
      .$dynamic()
  }

  async delete(organizationId: string, id: string): Promise<boolean> {
    const rows = await this.ctx.db
      .delete(webhookEndpoints)
      .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
      .returning({ id: webhookEndpoints.id })
    return rows.length > 0
  }

  async stats(endpointIds: string[]): Promise<Map<string, DeliveryStats>> {
    const out = new Map<string, DeliveryStats>()
    if (endpointIds.length === 0) return out
    const rows = await this.ctx.db
      .select({
        endpointId: webhookDeliveries.endpointId,
        pending: sql<number>`count(*) filter (where ${webhookDeliveries.status} = 'pending')`.mapWith(Number),
        succeeded: sql<number>`count(*) filter (where ${webhookDeliveries.status} = 'succeeded')`.mapWith(
          Number,
        ),
        failed: sql<number>`count(*) filter (where ${webhookDeliveries.status} = 'failed')`.mapWith(Number),
        lastAttemptAt: max(webhookDeliveries.lastAttemptAt),
      })
      .from(webhookDeliveries)
      .where(inArray(webhookDeliveries.endpointId, endpointIds))
      .groupBy(webhookDeliveries.endpointId)
    for (const row of rows) {
      out.set(row.endpointId, {
        pending: row.pending,
        succeeded: row.succeeded,
        failed: row.failed,
        lastAttemptAt: row.lastAttemptAt ? new Date(row.lastAttemptAt) : null,
      })
    }
    return out
  }

  /** Newest first; `limit + 1` rows so the caller knows whether another page exists. */
  listMessages(
    endpointId: string,
    options: { limit: number; beforeId?: string; status?: MessageStatus; eventType?: EventType },
  ): Promise<MessageRow[]> {
    const conditions = [eq(webhookDeliveries.endpointId, endpointId)]
    if (options.beforeId) conditions.push(lt(webhookDeliveries.messageId, options.beforeId))
    if (options.status) conditions.push(eq(webhookDeliveries.status, options.status))
    if (options.eventType) conditions.push(eq(webhookDeliveries.eventType, options.eventType))
    return this.ctx.db
      .select({
        id: webhookDeliveries.messageId,
        eventType: webhookDeliveries.eventType,
        status: webhookDeliveries.status,
        attemptCount: webhookDeliveries.attemptCount,
        nextAttemptAt: webhookDeliveries.nextAttemptAt,
        createdAt: webhookDeliveries.createdAt,
        payload: messageData,
      })
      .from(webhookDeliveries)
      .innerJoin(webhookMessages, eq(webhookMessages.id, webhookDeliveries.messageId))
      .where(and(...conditions))
      .orderBy(desc(webhookDeliveries.messageId))
      .limit(options.limit + 1)
  }

  /** The latest attempts of each listed message, newest first. */
  async attemptsOf(endpointId: string, messageIds: string[]): Promise<Map<string, AttemptRow[]>> {
    const out = new Map<string, AttemptRow[]>()
    if (messageIds.length === 0) return out
    const rows = await this.ctx.db
      .select()
      .from(webhookAttempts)
      .where(and(eq(webhookAttempts.endpointId, endpointId), inArray(webhookAttempts.messageId, messageIds)))
      .orderBy(desc(webhookAttempts.id))
    for (const row of rows) {
      const list = out.get(row.messageId) ?? []
      if (list.length < ATTEMPTS_SHOWN) list.push(row)
      out.set(row.messageId, list)
    }
    return out
  }

  /** Due now, whatever its state: a retry by hand. False when the endpoint has no such message. */
  async retryNow(endpointId: string, messageId: string, now: Date): Promise<boolean> {
    const rows = await this.ctx.db
      .update(webhookDeliveries)
      .set({ status: 'pending', nextAttemptAt: now, claimToken: null })
      .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.messageId, messageId)))
      .returning({ id: webhookDeliveries.messageId })
    return rows.length > 0
  }

  /** Every failed message created since `since` is due again now; returns how many. */
  async recover(endpointId: string, since: Date, now: Date): Promise<number> {
    const rows = await this.ctx.db
      .update(webhookDeliveries)
      .set({ status: 'pending', nextAttemptAt: now, claimToken: null })
      .where(
        and(
          eq(webhookDeliveries.endpointId, endpointId),
          eq(webhookDeliveries.status, 'failed'),
          sql`${webhookDeliveries.createdAt} >= ${since.toISOString()}::timestamptz`,
        ),
      )
      .returning({ id: webhookDeliveries.messageId })
    return rows.length
  }

  /**
   * Writes an event for every enabled endpoint of the organization that takes it, in one
   * statement: the message is written only when at least one endpoint does. Returns the number of
   * deliveries queued. `db` is a transaction when the event must commit with another write (a
   * token marked as announced, say) or not at all.
   */
  async enqueue(event: NewEvent, db: Executor = this.ctx.db): Promise<number> {
    const rows = await sqlRows<{ queued: number }>(db, ENQUEUE_SQL(event))
    return Number(rows[0]?.queued ?? 0)
  }
}

/**
 * The endpoint's `pauses` once `enabled` is set to `enabled` at `now` (an UPDATE's SET reads the old
 * row): turning it off opens a spell (and drops spells that ended more than `retentionDays` ago),
 * turning it on closes the open one, setting it as it is changes nothing.
 */
function pausesAfter(enabled: boolean, now: Date, retentionDays: number) {
  const at = now.toISOString()
  const cutoff = new Date(now.getTime() - retentionDays * 24 * 3_600_000).toISOString()
  const pauses = webhookEndpoints.pauses
  return sql`case
    when ${webhookEndpoints.enabled} and not ${enabled}::boolean then
      (select coalesce(jsonb_agg(p.spell order by p.n), '[]'::jsonb)
         from jsonb_array_elements(${pauses}) with ordinality as p(spell, n)
         where p.spell->>1 is null or (p.spell->>1)::timestamptz > ${cutoff}::timestamptz)
      || jsonb_build_array(jsonb_build_array(${at}::text, null))
    when not ${webhookEndpoints.enabled} and ${enabled}::boolean and jsonb_array_length(${pauses}) > 0 then
      jsonb_set(${pauses}, array[(jsonb_array_length(${pauses}) - 1)::text, '1'], to_jsonb(${at}::text))
    else ${pauses}
  end`
}

/** The database or a transaction: where enqueue() writes. */
export type Executor = Pick<Database, 'execute'>

// An endpoint `e` takes an event: the type subscribed (empty: all), and the source accepted (empty:
// all; an event of no source passes). One rule for enqueue() and the fan-out; ingest_leads()
// (drizzle/functions/ingest_leads.sql) applies the same one to decide whether to write a lead event.
const subscribesTo = (eventType: SQL) => sql`(e.event_types = '[]'::jsonb or e.event_types ? ${eventType})`
const acceptsSource = (sourceId: SQL) =>
  sql`(${sourceId} is null or e.source_ids = '[]'::jsonb or e.source_ids ? ${sourceId}::text)`

// The endpoint choice: enabled, and the rule above (a ping ignores the type filter).
const ENQUEUE_SQL = (e: NewEvent) => {
  const data = JSON.stringify(e.data)
  const createdAt = e.createdAt.toISOString()
  const sourceId = e.sourceId ?? null
  const endpointId = e.endpointId ?? null
  const exceptEndpointId = e.exceptEndpointId ?? null
  return sql`
with targets as (
  select e.id from webhook_endpoints e
  where e.organization_id = ${e.organizationId}::uuid and e.enabled
    and (${endpointId}::uuid is null or e.id = ${endpointId}::uuid)
    and (${exceptEndpointId}::uuid is null or e.id <> ${exceptEndpointId}::uuid)
    and (${endpointId}::uuid is not null or ${subscribesTo(sql`${e.type}::text`)})
    and ${acceptsSource(sql`${sourceId}::uuid`)}
), message as (
  insert into webhook_messages (id, organization_id, event_type, payload, created_at)
  select ${e.id}::uuid, ${e.organizationId}::uuid, ${e.type}::text, ${data}::jsonb, ${createdAt}::timestamptz where exists (select 1 from targets)
  returning id
), queued as (
  insert into webhook_deliveries (message_id, endpoint_id, organization_id, event_type, next_attempt_at, created_at)
  select m.id, t.id, ${e.organizationId}::uuid, ${e.type}::text, ${createdAt}::timestamptz, ${createdAt}::timestamptz from message m cross join targets t
  returning 1
)
select count(*)::int as queued from queued`
}

/**
 * A delivery taken by a worker: what it needs to send one attempt. The endpoint comes as its id and
 * the version of its row (`xmin`, changed by every update of the row): the worker keeps endpoints
 * (URL, opened secrets) by version and reads one again only when its row changed.
 */
export interface ClaimedDelivery {
  endpoint_id: string
  endpoint_version: string
  message_id: string
  organization_id: string
  event_type: string
  attempt_count: number
  /** The message's `data` as stored JSON text: the body is built around it, never re-serialised. */
  payload_json: string
  message_created_at: string | Date
}

/** What the worker keeps of an endpoint between deliveries (see ClaimedDelivery). */
export interface EndpointForDelivery {
  id: string
  version: string
  url: string
  secret_ciphertext: string
  previous_secret_ciphertext: string | null
  previous_secret_expires_at: string | Date | null
  failing_since: string | Date | null
}

interface ClaimOptions {
  now: Date
  leaseUntil: Date
  token: string
  limit: number
  perEndpoint: number
  inFlight: Record<string, number>
  /**
   * Only deliveries that are not a lead event's first attempt (alerts, pings, retries): what the
   * worker still sends at full speed while the inbound path is saturated (PRIORITY_DUE below).
   */
  priorityOnly?: boolean
}

/**
 * The deliveries a saturated replica does not defer (docs/webhooks.md, "Inbound first"): every
 * event but lead.*, and every delivery attempted before (a retry, a replay). The same text as the
 * partial index webhook_deliveries_priority_due_idx, so the planner uses it: the claim then never
 * walks the backlog of lead events to find the few that go first.
 */
const PRIORITY_DUE = sql`and (d.event_type not like 'lead.%' or d.last_attempt_at is not null)`

/** One attempt to record: the claimed delivery, the claim's token, how it ended. */
export interface AttemptResult {
  delivery: Pick<ClaimedDelivery, 'endpoint_id' | 'message_id'>
  token: string
  outcome: AttemptOutcome
}

/** How an attempt ended, as recorded. */
export interface AttemptOutcome {
  attemptedAt: Date
  responseStatus: number | null
  durationMs: number
  responseBody: string | null
  error: string | null
  succeeded: boolean
  /** Null: give up (`failed`); otherwise the next attempt's time. */
  nextAttemptAt: Date | null
}

/**
 * The outbox as a job queue (FOR UPDATE SKIP LOCKED over webhook_deliveries): claims, results and
 * releases. Every write after the claim is conditional on the claim token, so a worker whose lease
 * ran out (it stalled past the attempt time limit and another replica took the delivery) changes
 * nothing.
 */
export class DeliveryQueueRepository {
  constructor(private readonly ctx: AppContext) {}

  /**
   * Up to `limit` due deliveries of enabled endpoints, at most `room(endpoint)` per endpoint (its
   * in-flight cap minus what this worker already has in flight there, passed as JSON), oldest first
   * per endpoint. Claimed rows get the token and a lease (`next_attempt_at` = `leaseUntil`).
   */
  claim(options: ClaimOptions): Promise<ClaimedDelivery[]> {
    return this.ctx.db.transaction(async (tx) => {
      await tx.execute(CLAIM_PLANNER_SETTINGS)
      return sqlRows<ClaimedDelivery>(tx, claimStatement(options))
    })
  }

  /**
   * Fan-out at the claim (drizzle/0019): up to `limit` lead events that ingest_leads() wrote as a
   * message only, oldest first, each turned into one pending delivery per endpoint that takes it,
   * and marked done, in one statement. SKIP LOCKED: messages another replica is fanning out right
   * now are left to it. Returns the messages taken and the deliveries written.
   */
  async fanOut(limit: number): Promise<{ messages: number; deliveries: number }> {
    const [row] = await sqlRows<{ messages: number; deliveries: number }>(this.ctx.db, fanOutStatement(limit))
    return { messages: Number(row?.messages ?? 0), deliveries: Number(row?.deliveries ?? 0) }
  }

  /** Whether any organization has an enabled endpoint (the partial index on enabled endpoints). */
  async anyEnabledEndpoint(): Promise<boolean> {
    const [row] = await sqlRows<{ found: boolean }>(
      this.ctx.db,
      sql`select exists (select 1 from webhook_endpoints where enabled) as found`,
    )
    return row?.found === true
  }

  /** The endpoints a claim named whose version the worker does not hold: one statement for all. */
  endpoints(ids: string[]): Promise<EndpointForDelivery[]> {
    // The ids as one JSON parameter: an array parameter is bound differently by the two drivers.
    return sqlRows<EndpointForDelivery>(
      this.ctx.db,
      sql`select id, xmin::text as version, url, secret_ciphertext, previous_secret_ciphertext,
         previous_secret_expires_at, failing_since
       from webhook_endpoints
       where id in (select jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)::uuid)`,
    )
  }

  /**
   * Stores attempts and their deliveries' new state, any number in one statement (the worker
   * collects the attempts that end in one event-loop turn). Returns the keys (`endpoint_id:message_id`)
   * that were recorded; one whose claim was lost meanwhile is not.
   */
  async record(results: AttemptResult[]) {
    const rows = await sqlRows<{ endpoint_id: string; message_id: string }>(
      this.ctx.db,
      recordStatement(results),
    )
    return new Set(rows.map((row) => `${row.endpoint_id}:${row.message_id}`))
  }

  /** Gives claimed deliveries back untried (shutdown): due at once, the attempt not counted. */
  async release(token: string, now: Date): Promise<void> {
    await this.ctx.db
      .update(webhookDeliveries)
      .set({ nextAttemptAt: now, attemptCount: sql`${webhookDeliveries.attemptCount} - 1`, claimToken: null })
      .where(and(eq(webhookDeliveries.claimToken, token), eq(webhookDeliveries.status, 'pending')))
  }

  /**
   * Disables the endpoint if it is still failing since `failingBefore` or earlier, and gives up its
   * pending deliveries. Returns the endpoint when this call disabled it (once, whatever the number
   * of workers that noticed).
   */
  async disableIfFailingSince(
    endpointId: string,
    failingBefore: Date,
    now: Date,
  ): Promise<{ id: string; organizationId: string; url: string; failingSince: Date } | null> {
    const rows = await sqlRows<{
      id: string
      organization_id: string
      url: string
      failing_since: string | Date
    }>(
      this.ctx.db,
      sql`with disabled as (
         update webhook_endpoints set enabled = false, disabled_reason = 'failing_for_5_days',
           updated_at = ${now.toISOString()}::timestamptz,
           pauses = ${pausesAfter(false, now, this.ctx.config.logRetentionDays)}
         where id = ${endpointId}::uuid and enabled and failing_since <= ${failingBefore.toISOString()}::timestamptz
         returning id, organization_id, url, failing_since
       ), given_up as (
         update webhook_deliveries d set status = 'failed', claim_token = null
         from disabled where d.endpoint_id = disabled.id and d.status = 'pending'
       )
       select * from disabled`,
    )
    const row = rows[0]
    return row
      ? {
          id: row.id,
          organizationId: row.organization_id,
          url: row.url,
          failingSince: new Date(row.failing_since),
        }
      : null
  }
}

/**
 * The claim is planned without bitmap scans (SET LOCAL: its own transaction only). Each endpoint's
 * due deliveries must be read in the index's order and the read must stop at the batch; a bitmap
 * scan reads every due delivery of the endpoint and sorts them. The planner chose one whenever it
 * estimated an endpoint's due deliveries at about one row, which statistics of many endpoints and
 * mostly delivered rows give (as in production): on a test database of 1,384 endpoints and 1,158
 * other deliveries the generic plan read 19,942 rows to claim 32, and deleting 37 failed deliveries
 * from it (an estimate of 2 rows) brought back the index scan (test/integration/webhook-claim-plan.test.ts).
 */
export const CLAIM_PLANNER_SETTINGS = sql`set local enable_bitmapscan = off`

// The endpoints with something pending, one index probe each (a skip scan of the due index: the next
// endpoint id after the last one found), then per enabled one its oldest due rows up to its room.
// Not `exists (… due …)` per endpoint: with the table's statistics behind its growth (a burst of
// leads fills it within seconds; autovacuum analyses it minutes later, or never where it is off)
// the planner hashed every due delivery to find the endpoints that have one (~12 ms per claim at a
// backlog of 50,000, each claim then taking ~30: the drain ran at ~1,500 events/s, bound by it).
// Every step here is a LIMIT over the partial index, which no row estimate turns into a scan of the
// backlog, and the update finds the rows it locked by their `ctid` as an array (a TID scan; the lock
// keeps the version current until the update, and the key is checked as well when the claimed rows
// are joined back to what was chosen): joined on the key alone, stale statistics hashed every
// delivery of the endpoint to update 32 of them, and joined on `ctid` as a relation, the generic plan
// the drivers settle on (a prepared statement whose LIMIT is a parameter) hashed the chosen rows
// against a scan of every delivery (test/integration/webhook-claim-plan.test.ts, embedded PGlite). SKIP LOCKED: rows another worker is claiming right now are left to it, never waited
// for. The endpoint's row is read for its version only; the worker reads the rest when the version
// is new to it.
export const claimStatement = (o: ClaimOptions) => {
  const now = o.now.toISOString()
  const inFlight = JSON.stringify(o.inFlight)
  const leaseUntil = o.leaseUntil.toISOString()
  const only = o.priorityOnly ? PRIORITY_DUE : sql``
  return sql`
with recursive pending_endpoints(id) as (
  (select d.endpoint_id from webhook_deliveries d where d.status = 'pending' ${only}
   order by d.endpoint_id, d.next_attempt_at limit 1)
  union all
  select (select d.endpoint_id from webhook_deliveries d
          where d.status = 'pending' ${only} and d.endpoint_id > p.id
          order by d.endpoint_id, d.next_attempt_at limit 1)
  from pending_endpoints p where p.id is not null
), due_endpoints as (
  select e.id, e.xmin::text as version, ${o.perEndpoint}::int - coalesce((${inFlight}::jsonb ->> e.id::text)::int, 0) as room
  from pending_endpoints p join webhook_endpoints e on e.id = p.id
  where e.enabled
), chosen as (
  select x.row_id, x.endpoint_id, x.message_id, de.version from due_endpoints de
  cross join lateral (
    select d.ctid as row_id, d.endpoint_id, d.message_id from webhook_deliveries d
    where d.endpoint_id = de.id and d.status = 'pending' and d.next_attempt_at <= ${now}::timestamptz ${only}
    order by d.next_attempt_at
    limit greatest(de.room, 0)
    for update skip locked
  ) x
  limit ${o.limit}::int
), claimed as (
  update webhook_deliveries d
  set next_attempt_at = ${leaseUntil}::timestamptz, claim_token = ${o.token}::uuid, attempt_count = d.attempt_count + 1
  from webhook_messages m
  where d.ctid = any (array(select c.row_id from chosen c)) and m.id = d.message_id
  returning d.endpoint_id, d.message_id, d.organization_id, d.event_type,
    d.attempt_count, webhook_message_payload(m)::text as payload_json, m.created_at as message_created_at
)
-- Sent in the order the events happened (UUIDv7 ids): an update returns its rows in the order it
-- met them, which is the rows' place in the table, not their schedule.
select cl.endpoint_id, c.version as endpoint_version, cl.message_id, cl.organization_id, cl.event_type,
  cl.attempt_count, cl.payload_json, cl.message_created_at
from claimed cl join chosen c on c.endpoint_id = cl.endpoint_id and c.message_id = cl.message_id
order by cl.endpoint_id, cl.message_id`
}

// The fan-out (drizzle/0021): takes lead events from the queue by their ids, oldest first, and writes
// what the lead's transaction left to it. A `lead.created` event's message is written here from the
// lead row (whose id is the event's: the row is the snapshot until its first write, when the
// trigger leads_keep_event_snapshot copies it into the message, writing the message itself if it
// comes first) with its source's name now; a source renamed or deleted since the lead wrote its
// queued events' messages with the name they had (webhook_sources_keep_event_names). An updated
// lead's message, and any the trigger wrote, are taken as they are. A queued id with neither message
// nor lead (an organization deleted meanwhile) is dropped.
// The endpoint rule is ingest_leads()'s, which queued the event only when an endpoint took it, applied
// to the endpoint as it was at the event's time: created by then and not disabled then (its `pauses`,
// drizzle/0020), the event type subscribed (empty: all), the submitting source accepted (empty: all).
// The fan-out comes milliseconds after the lead's commit, or minutes after a saturated spell
// (docs/webhooks.md), and an endpoint disabled meanwhile must not lose what it took: its delivery waits
// as its pending ones do, and one disabled for failing five days gets it as `failed`, as its pending
// ones became (`recover` sends them again). A filter changed meanwhile applies as it is now. The
// delivery is due at the event's time, as when the lead's transaction wrote it. The key conflicts
// cannot happen (an event is fanned out once, under its queue row's lock; a trigger's message
// written concurrently makes this insert wait for it and then do nothing) but cost nothing to guard.
// Every read is a LIMIT over the queue's key or a key lookup per taken event: stale statistics (the
// tables grow by thousands of rows a second) cannot turn it into a scan of every message or lead
// (test/integration/webhook-claim-plan.test.ts).
export const fanOutStatement = (limit: number) => sql`
with taken as (
  select q.ctid as row_id, q.id from webhook_fan_out_queue q
  order by q.id
  limit ${limit}::int
  for update skip locked
), removed as (
  delete from webhook_fan_out_queue q where q.ctid = any (array(select t.row_id from taken t))
), events as (
  -- One key lookup per taken id (OFFSET 0 keeps the subquery per row): the generic plan the drivers
  -- settle on estimates the batch at a guess and would otherwise hash-join it against every
  -- message and every lead (a scan of each per statement: seconds of delivery lag at 1,000 leads/s).
  select ev.* from taken t cross join lateral (
    select m.id, m.organization_id, m.event_type, m.created_at, m.source_id, false as unwritten
    from webhook_messages m where m.id = t.id
    union all
    select l.id, l.organization_id, 'lead.created', l.created_at, l.source_id, true
    from leads l where l.id = t.id and not exists (select 1 from webhook_messages m where m.id = t.id)
    offset 0
  ) ev
), written as (
  insert into webhook_messages (id, organization_id, event_type, created_at, lead_id, source_id, source_name)
  select ev.id, ev.organization_id, ev.event_type, ev.created_at, ev.id, ev.source_id,
    (select s.name from webhook_sources s where s.id = ev.source_id)
  from events ev
  where ev.unwritten
  on conflict (id) do nothing
), queued as (
  insert into webhook_deliveries (message_id, endpoint_id, organization_id, event_type, next_attempt_at, created_at,
    status)
  select t.id, e.id, t.organization_id, t.event_type, t.created_at, t.created_at,
    case when not e.enabled and e.disabled_reason = 'failing_for_5_days' then 'failed' else 'pending' end
  from events t
  join webhook_endpoints e on e.organization_id = t.organization_id
    and e.created_at <= t.created_at
    and not exists (
      select 1 from jsonb_array_elements(e.pauses) p
      where (p->>0)::timestamptz <= t.created_at and (p->>1 is null or t.created_at < (p->>1)::timestamptz))
    and ${subscribesTo(sql`t.event_type`)}
    and ${acceptsSource(sql`t.source_id`)}
  on conflict do nothing
  returning 1
)
select (select count(*) from taken)::int as messages, (select count(*) from queued)::int as deliveries`

// The deliveries' new state, their attempts, and each endpoint's failure streak (started by its
// first failure after its last success, ended by a success), only for claims still held. The
// deliveries are found by key, one lookup per result (a scalar subquery runs per row), and updated by
// the `ctid`s found: joined to the results as a relation, the generic plan the drivers settle on
// hashed them against a scan of every delivery (test/integration/webhook-claim-plan.test.ts). The
// key and the claim token are checked again at the update (a row another worker changed meanwhile
// is read in its new version, whose token no longer matches).
export const recordStatement = (results: AttemptResult[]) => {
  const items = results.map(({ delivery, token, outcome }) => ({
    endpoint_id: delivery.endpoint_id,
    message_id: delivery.message_id,
    token,
    status: outcome.succeeded ? 'succeeded' : outcome.nextAttemptAt ? 'pending' : 'failed',
    next_attempt_at: (outcome.nextAttemptAt ?? outcome.attemptedAt).toISOString(),
    attempted_at: outcome.attemptedAt.toISOString(),
    response_status: outcome.responseStatus,
    attempt_id: newId(),
    duration_ms: outcome.durationMs,
    response_body: outcome.responseBody,
    error: outcome.error,
    succeeded: outcome.succeeded,
  }))
  return sql`
with input as (
  select * from jsonb_to_recordset(${JSON.stringify(items)}::jsonb) as x(endpoint_id uuid, message_id uuid, token uuid, status text,
    next_attempt_at timestamptz, attempted_at timestamptz, response_status smallint, attempt_id uuid,
    duration_ms real, response_body text, error text, succeeded boolean)
), delivery as (
  update webhook_deliveries d
  set status = i.status, next_attempt_at = i.next_attempt_at, last_attempt_at = i.attempted_at,
    last_response_status = i.response_status, claim_token = null
  from input i
  where d.ctid = any (array(
      select (select k.ctid from webhook_deliveries k where k.endpoint_id = r.endpoint_id and k.message_id = r.message_id)
      from input r))
    and d.endpoint_id = i.endpoint_id and d.message_id = i.message_id and d.claim_token = i.token
  returning d.endpoint_id, d.message_id
), recorded as (
  select i.* from input i join delivery d on d.endpoint_id = i.endpoint_id and d.message_id = i.message_id
), attempt as (
  insert into webhook_attempts (id, endpoint_id, message_id, attempted_at, response_status, duration_ms, response_body, error)
  select attempt_id, endpoint_id, message_id, attempted_at, response_status, duration_ms, response_body, error
  from recorded
), by_endpoint as (
  select endpoint_id, max(attempted_at) filter (where succeeded) as last_success,
    min(attempted_at) filter (where not succeeded) as first_failure
  from recorded group by endpoint_id
), streak_input as (
  select b.*, (select min(r.attempted_at) from recorded r
               where r.endpoint_id = b.endpoint_id and not r.succeeded and r.attempted_at > b.last_success)
    as failure_after_success
  from by_endpoint b
), streak as (
  update webhook_endpoints e
  set failing_since = case
    when b.last_success is null then coalesce(e.failing_since, b.first_failure)
    else b.failure_after_success
  end
  from streak_input b where e.id = b.endpoint_id
    -- Only when it changes (a streak starts or ends): a batch of successes, or of failures while
    -- failing already, leaves the row (and so its version, which the workers cache by) alone.
    and case when b.last_success is null then e.failing_since is null
             else e.failing_since is distinct from b.failure_after_success end
)
select endpoint_id, message_id from delivery`
}
