import { and, count, desc, eq, inArray, lt, max, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import {
  webhookAttempts,
  webhookDeliveries,
  webhookEndpoints,
  webhookMessages,
  webhookSources,
} from '../../db/schema'
import type { EventType, MessageStatus } from './model'

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
    const [row] = await this.ctx.db
      .update(webhookEndpoints)
      .set(changes)
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
        payload: webhookMessages.payload,
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
   * deliveries queued.
   */
  async enqueue(event: NewEvent): Promise<number> {
    const rows = await this.ctx.database.query<{ queued: number }>(ENQUEUE_SQL, [
      event.id,
      event.organizationId,
      event.type,
      JSON.stringify(event.data),
      event.createdAt.toISOString(),
      event.sourceId ?? null,
      event.endpointId ?? null,
      event.exceptEndpointId ?? null,
    ])
    return Number(rows[0]?.queued ?? 0)
  }
}

// The endpoint choice is the same rule as ingest_leads() applies to lead events (drizzle/0011):
// enabled, the event type subscribed (empty: all), the source accepted (empty: all).
const ENQUEUE_SQL = `
with targets as (
  select e.id from webhook_endpoints e
  where e.organization_id = $2::uuid and e.enabled
    and ($7::uuid is null or e.id = $7::uuid)
    and ($8::uuid is null or e.id <> $8::uuid)
    and ($7::uuid is not null or e.event_types = '[]'::jsonb or e.event_types ? $3::text)
    and ($6::uuid is null or e.source_ids = '[]'::jsonb or e.source_ids ? $6::text)
), message as (
  insert into webhook_messages (id, organization_id, event_type, payload, created_at)
  select $1::uuid, $2::uuid, $3::text, $4::jsonb, $5::timestamptz where exists (select 1 from targets)
  returning id
), queued as (
  insert into webhook_deliveries (message_id, endpoint_id, organization_id, event_type, next_attempt_at, created_at)
  select m.id, t.id, $2::uuid, $3::text, $5::timestamptz, $5::timestamptz from message m cross join targets t
  returning 1
)
select count(*)::int as queued from queued`
