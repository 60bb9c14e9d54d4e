import { sql } from 'drizzle-orm'
import {
  boolean,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  real,
  smallint,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core'
import { organizations } from './organizations'

/** A spell an endpoint was disabled: from, and until (null: it still is). ISO times. */
export type EndpointPause = [string, string | null]

/** Where an organization's events are pushed (outbound webhooks). */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: uuid('id').primaryKey(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description').notNull().default(''),
    // Empty: every event type; otherwise only these.
    eventTypes: jsonb('event_types').$type<string[]>().notNull().default([]),
    // Empty: leads of every source; otherwise only leads of these sources.
    sourceIds: jsonb('source_ids').$type<string[]>().notNull().default([]),
    enabled: boolean('enabled').notNull().default(true),
    // The signing secret, encrypted with the configured key (lib/secrets.ts SecretBox): a database
    // dump alone never yields a usable secret.
    secretCiphertext: text('secret_ciphertext').notNull(),
    // After a rotation the old secret signs alongside the new one until this time.
    previousSecretCiphertext: text('previous_secret_ciphertext'),
    previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true, mode: 'date' }),
    // Start of the current run of failed attempts (null after a success): five days of it disable.
    failingSince: timestamp('failing_since', { withTimezone: true, mode: 'date' }),
    disabledReason: text('disabled_reason'),
    // The spells it was disabled, [from, until or null] as ISO times, oldest first (drizzle/0020): the
    // delivery worker fans a lead event out after its lead committed (drizzle/0019), and gives it to
    // the endpoints enabled at the event's time, which is what these tell. Spells that ended longer
    // than LOG_RETENTION_DAYS ago are dropped at the next disable (no such event is left).
    pauses: jsonb('pauses').$type<EndpointPause[]>().notNull().default(sql`'[]'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [
    index('webhook_endpoints_organization_idx').on(table.organizationId, table.id),
    // ingest_leads() probes this once per lead: with no enabled endpoint it finds nothing at once.
    index('webhook_endpoints_enabled_organization_idx').on(table.organizationId).where(sql`${table.enabled}`),
  ],
)

/**
 * One event (`lead.created`, `ping`…) as it is sent: its id is the `webhook-id` of every attempt, so
 * receivers deduplicate on it. Written in the same transaction as what it describes; no foreign key
 * (it is written by ingest_leads() on the hot path, and outlives nothing it refers to).
 *
 * A lead event (`lead.created`, `lead.updated`) keeps the lead as its transaction left it in typed
 * columns (`lead_*`, `source_id`, `source_name`), not as a built `payload`: its `data` is rendered from them when
 * it is read (webhook_message_payload(), drizzle/functions), the same JSON the payload column held
 * before drizzle/0018. The row is ~250 bytes instead of ~680, and the lead path neither builds nor
 * writes the JSON (docs/webhooks.md "Cost on the lead path"). Every other event keeps `payload`.
 */
export const webhookMessages = pgTable(
  'webhook_messages',
  {
    id: uuid('id').primaryKey(),
    organizationId: uuid('organization_id').notNull(),
    eventType: text('event_type').notNull(),
    // The `data` of the body `{type, timestamp, data}`; null for a lead event (its lead_* columns).
    payload: jsonb('payload').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    leadId: uuid('lead_id'),
    leadSourceId: uuid('lead_source_id'),
    leadFirstName: text('lead_first_name'),
    leadLastName: text('lead_last_name'),
    leadEmail: text('lead_email'),
    leadPhoneRaw: text('lead_phone_raw'),
    leadPhoneE164: text('lead_phone_e164'),
    leadStatus: text('lead_status'),
    leadCustomFields: jsonb('lead_custom_fields').$type<Record<string, unknown>>(),
    leadAttribution: jsonb('lead_attribution').$type<Record<string, unknown>>(),
    leadCreatedAt: timestamp('lead_created_at', { withTimezone: true, mode: 'date' }),
    leadUpdatedAt: timestamp('lead_updated_at', { withTimezone: true, mode: 'date' }),
    // The submission's source, which for a merge into an older lead can differ from the lead's.
    sourceId: uuid('source_id'),
    sourceName: text('source_name'),
  },
  // No index on organization_id (dropped in drizzle/0015): no query reads messages by organization
  // (listing goes through an endpoint's deliveries, retention by age), and ingest_leads() paid for it
  // on every lead event.
  (table) => [
    check(
      'webhook_messages_payload_or_lead',
      sql`${table.payload} is not null or ${table.leadId} is not null`,
    ),
  ],
)

/**
 * The lead events the delivery worker has not yet taken (drizzle/0021): one row per event, its id
 * alone (the message id: the submission's delivery-log id), written by ingest_leads() in the lead's
 * transaction and deleted by the worker's fan-out, which writes the event's message (a created
 * lead's, from the lead row; an updated lead's was written with it) and its deliveries. It is the
 * whole of a `lead.created` event on the lead path: a 16-byte key and its b-tree entry, where a
 * message row and two b-tree entries wrote ~130 bytes of WAL more per lead event (the saturated
 * service's throughput with an endpoint did not measurably move: docs/webhooks.md "Cost on the lead
 * path"). A row whose lead and message are both gone (an organization deleted meanwhile) is dropped
 * by the fan-out.
 */
export const webhookFanOutQueue = pgTable('webhook_fan_out_queue', {
  id: uuid('id').primaryKey(),
})

/**
 * A message on its way to one endpoint: the outbox row the worker claims. `next_attempt_at` is both
 * the schedule and the lease: a claim moves it past the attempt's time limit, so a replica that dies
 * mid-attempt leaves the row due again (same message id) once the lease runs out.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    messageId: uuid('message_id').notNull(),
    // No foreign key (drizzle/0015): its check was an SPI query and a share lock of the one endpoint
    // row per lead event, which concurrent ingest groups turned into MultiXacts. A deleted
    // endpoint's deliveries go by the trigger webhook_endpoints_delete_deliveries; one written by a
    // group that raced the delete is never claimed (the claim starts from the enabled endpoints)
    // and goes with retention.
    endpointId: uuid('endpoint_id').notNull(),
    organizationId: uuid('organization_id').notNull(),
    eventType: text('event_type').notNull(),
    // pending | succeeded | failed
    status: text('status').notNull().default('pending'),
    attemptCount: integer('attempt_count').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, mode: 'date' }).notNull(),
    // Set by a claim; the attempt's result is only recorded by the claim that still holds it.
    claimToken: uuid('claim_token'),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true, mode: 'date' }),
    lastResponseStatus: smallint('last_response_status'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [
    // Message ids are UUIDv7: the key also lists an endpoint's messages newest first.
    primaryKey({ columns: [table.endpointId, table.messageId] }),
    // The worker's claim: per enabled endpoint, its due deliveries in schedule order.
    // No index on message_id alone (dropped in drizzle/0016): only retention looked deliveries up by
    // message, and it now goes through the organization's endpoints and this table's key.
    index('webhook_deliveries_due_idx')
      .on(table.endpointId, table.nextAttemptAt)
      .where(sql`${table.status} = 'pending'`),
    // The claim of a saturated replica (inbound first, docs/webhooks.md): alerts, pings and retries
    // go on while lead events wait, without walking their backlog. A lead event enters it only once
    // an attempt of it failed (last_attempt_at is set when a result is recorded, never by the claim).
    index('webhook_deliveries_priority_due_idx')
      .on(table.endpointId, table.nextAttemptAt)
      .where(
        sql`${table.status} = 'pending' and (${table.eventType} not like 'lead.%' or ${table.lastAttemptAt} is not null)`,
      ),
  ],
)

/** One HTTP attempt of a delivery: what the receiver answered, and how fast. */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: uuid('id').primaryKey(),
    endpointId: uuid('endpoint_id').notNull(),
    messageId: uuid('message_id').notNull(),
    attemptedAt: timestamp('attempted_at', { withTimezone: true, mode: 'date' }).notNull(),
    responseStatus: smallint('response_status'),
    durationMs: real('duration_ms').notNull(),
    // The first 2 KB of the response body.
    responseBody: text('response_body'),
    // Why no response was had (timeout, refused address, connection error).
    error: text('error'),
  },
  (table) => [
    foreignKey({
      columns: [table.endpointId, table.messageId],
      foreignColumns: [webhookDeliveries.endpointId, webhookDeliveries.messageId],
    }).onDelete('cascade'),
    index('webhook_attempts_delivery_idx').on(table.endpointId, table.messageId, table.id),
  ],
)
