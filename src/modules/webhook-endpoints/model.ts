import { t } from 'elysia'
import { ListQueryFields, NextCursor, ResourceId } from '../../lib/schemas'
import { Lead } from '../leads/model'

/** Every event an endpoint can subscribe to (docs/webhooks.md describes each). */
export const EVENT_TYPES = [
  'lead.created',
  'lead.updated',
  'source.status_changed',
  'endpoint.disabled',
  'pat.expiring',
  'ping',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const ENDPOINTS_PER_ORGANIZATION_MAX = 50
export const SOURCE_FILTER_MAX_ENTRIES = 100
export const URL_MAX_LENGTH = 2048
/** After a rotation the old secret keeps signing alongside the new one this long. */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 3600 * 1000

const Timestamp = t.String({ format: 'date-time' })
// Spelled out (not mapped from EVENT_TYPES) so the static type keeps the literals.
const EventTypeSchema = t.Union(
  [
    t.Literal('lead.created'),
    t.Literal('lead.updated'),
    t.Literal('source.status_changed'),
    t.Literal('endpoint.disabled'),
    t.Literal('pat.expiring'),
    t.Literal('ping'),
  ],
  { description: 'an event type' },
)

const examples = {
  endpoint: {
    id: '01975e0c-8c3b-7d4e-9f50-6a7b8c9d0e1f',
    url: 'https://hooks.example.com/lead-capture',
    description: 'CRM sync',
    event_types: ['lead.created', 'lead.updated'],
    source_ids: [],
    enabled: true,
    disabled_reason: null,
    created_at: '2026-01-01T10:00:00.000Z',
    updated_at: '2026-01-01T10:00:00.000Z',
    stats: { pending: 0, succeeded: 42, failed: 1, last_attempt_at: '2026-01-02T08:00:00.000Z' },
  },
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
}

const Url = t.String({
  minLength: 1,
  maxLength: URL_MAX_LENGTH,
  description:
    'Where events are POSTed: `https`, and a host that resolves to public addresses only (no loopback, private, link-local, multicast or cloud-metadata address; checked now and before every attempt). OUTBOUND_ALLOW_PRIVATE_NETWORKS=true lifts both rules.',
  examples: ['https://hooks.example.com/lead-capture'],
})
const Description = t.String({ maxLength: 500, description: 'free text for people, up to 500 characters' })
const EventTypes = t.Array(EventTypeSchema, {
  maxItems: EVENT_TYPES.length,
  uniqueItems: true,
  description: `Events sent to this endpoint; empty: all of them (${EVENT_TYPES.join(', ')})`,
  examples: [['lead.created']],
})
const SourceIds = t.Array(t.String({ format: 'uuid' }), {
  maxItems: SOURCE_FILTER_MAX_ENTRIES,
  uniqueItems: true,
  description:
    "Only `lead.*` and `source.status_changed` events of these sources (ids of the organization's sources); empty: every source",
})

export const EndpointStats = t.Object(
  {
    pending: t.Integer({ description: 'messages waiting for a (next) attempt' }),
    succeeded: t.Integer({ description: 'messages delivered (a 2xx answer)' }),
    failed: t.Integer({
      description: 'messages given up after the last retry, or when the endpoint was disabled',
    }),
    last_attempt_at: t.Union([Timestamp, t.Null()]),
  },
  { description: 'Delivery counts over the messages kept for this endpoint' },
)

export const EndpointRecord = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    url: t.String(),
    description: t.String(),
    event_types: t.Array(EventTypeSchema),
    source_ids: t.Array(t.String({ format: 'uuid' })),
    enabled: t.Boolean({ description: 'a disabled endpoint gets no new messages and no attempts' }),
    disabled_reason: t.Union([t.String(), t.Null()], {
      description: '`failing_for_5_days` when the service disabled it; null otherwise',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
    stats: EndpointStats,
  },
  {
    title: 'WebhookEndpoint',
    description: 'An outbound webhook endpoint. Its signing secret is never shown here.',
    examples: [examples.endpoint],
  },
)
export type EndpointRecord = typeof EndpointRecord.static

export const EndpointWithSecret = t.Object(
  {
    ...EndpointRecord.properties,
    secret: t.String({
      description:
        'The signing secret (`whsec_` + base64), shown only at creation and rotation: verify `webhook-signature` with it',
      examples: [examples.secret],
    }),
    previous_secret_expires_at: t.Union([Timestamp, t.Null()], {
      description: 'after a rotation: until then the old secret also signs every message',
    }),
  },
  {
    title: 'WebhookEndpointWithSecret',
    description: 'The endpoint with its signing secret: returned only at creation and rotation',
    examples: [{ ...examples.endpoint, secret: examples.secret, previous_secret_expires_at: null }],
  },
)
export type EndpointWithSecret = typeof EndpointWithSecret.static

export const EndpointList = t.Object(
  { data: t.Array(EndpointRecord), next_cursor: NextCursor },
  { title: 'WebhookEndpointPage', description: 'A page of endpoints, newest first' },
)
export type EndpointList = typeof EndpointList.static

export const EndpointListQuery = t.Object({ ...ListQueryFields })
export type EndpointListQuery = typeof EndpointListQuery.static

export const EndpointIdParams = t.Object({
  id: ResourceId('Endpoint id'),
})

export const MessageParams = t.Object({
  id: ResourceId('Endpoint id'),
  message_id: ResourceId('Message id: the `webhook-id` of its attempts'),
})

export const CreateEndpointBody = t.Object(
  {
    url: Url,
    description: t.Optional(Description),
    event_types: t.Optional(EventTypes),
    source_ids: t.Optional(SourceIds),
    enabled: t.Optional(t.Boolean({ default: true })),
  },
  {
    title: 'CreateWebhookEndpointRequest',
    additionalProperties: false,
    description: 'A field not listed here is a 400 `validation_failed` naming it.',
    examples: [{ url: 'https://hooks.example.com/lead-capture', event_types: ['lead.created'] }],
  },
)
export type CreateEndpointBody = typeof CreateEndpointBody.static

export const UpdateEndpointBody = t.Object(
  {
    url: t.Optional(Url),
    description: t.Optional(Description),
    event_types: t.Optional(EventTypes),
    source_ids: t.Optional(SourceIds),
    enabled: t.Optional(t.Boolean()),
  },
  {
    title: 'UpdateWebhookEndpointRequest',
    additionalProperties: false,
    description:
      'Only the fields sent change; lists are replaced whole. `enabled: true` also clears `disabled_reason` and the failure streak. A field not listed here is a 400 `validation_failed` naming it.',
    examples: [{ enabled: false }, { event_types: ['lead.created', 'source.status_changed'] }],
  },
)
export type UpdateEndpointBody = typeof UpdateEndpointBody.static

export const MESSAGE_STATUSES = ['pending', 'succeeded', 'failed'] as const
export type MessageStatus = (typeof MESSAGE_STATUSES)[number]
const MessageStatusSchema = t.Union([t.Literal('pending'), t.Literal('succeeded'), t.Literal('failed')], {
  description:
    '`pending`: waiting for its first or next attempt; `succeeded`: a 2xx answer; `failed`: retries exhausted or the endpoint was disabled',
})

export const Attempt = t.Object({
  attempted_at: Timestamp,
  response_status: t.Union([t.Integer(), t.Null()], { description: 'null when no response came' }),
  duration_ms: t.Number(),
  response_body: t.Union([t.String(), t.Null()], { description: 'the first 2 KB of the response body' }),
  error: t.Union([t.String(), t.Null()], {
    description: 'why there was no usable response: `timeout`, `connection_failed`, `address_refused`…',
  }),
})

export const MessageRecord = t.Object(
  {
    id: t.String({ format: 'uuid', description: 'the `webhook-id` header of every attempt' }),
    event_type: EventTypeSchema,
    status: MessageStatusSchema,
    attempt_count: t.Integer(),
    next_attempt_at: t.Union([Timestamp, t.Null()], { description: 'when pending: the next attempt' }),
    created_at: Timestamp,
    payload: t.Record(t.String(), t.Unknown(), { description: 'the body sent: `{type, timestamp, data}`' }),
    attempts: t.Array(Attempt, { description: 'newest first, at most 20' }),
  },
  { title: 'WebhookMessage', description: 'A message on its way to one endpoint, with its attempts' },
)
export type MessageRecord = typeof MessageRecord.static

export const MessageList = t.Object(
  { data: t.Array(MessageRecord), next_cursor: NextCursor },
  { title: 'WebhookMessagePage', description: 'Messages of the endpoint, newest first' },
)
export type MessageList = typeof MessageList.static

export const MessageListQuery = t.Object({
  ...ListQueryFields,
  status: t.Optional(MessageStatusSchema),
  event_type: t.Optional(EventTypeSchema),
})
export type MessageListQuery = typeof MessageListQuery.static

export const RecoverBody = t.Object(
  {
    since: t.String({
      format: 'date-time',
      description: 'every failed message of the endpoint created at or after this instant is sent again',
      examples: ['2026-01-01T00:00:00Z'],
    }),
  },
  {
    title: 'RecoverWebhookMessagesRequest',
    additionalProperties: false,
    examples: [{ since: '2026-01-01T00:00:00Z' }],
  },
)
export type RecoverBody = typeof RecoverBody.static

export const RecoverResult = t.Object({
  queued: t.Integer({ description: 'how many failed messages were queued again' }),
})

export const QueuedMessage = t.Object({
  message_id: t.String({
    format: 'uuid',
    description: 'the message queued for an attempt now (its `webhook-id`)',
  }),
})

// ---------------------------------------------------------------------------------------------
// Event payloads: the body of every message is `{type, timestamp, data}`. One schema per event
// type, exported for the OpenAPI `webhooks` section.

const SourceRef = t.Object({ id: t.String({ format: 'uuid' }), name: t.String() })

export const LeadEventData = t.Object(
  {
    lead: Lead,
    source: t.Union([SourceRef, t.Null()], { description: 'the source the submission came through' }),
    delivery_log_id: t.String({
      format: 'uuid',
      description:
        "the submission's entry in the source's delivery log (`GET /api/webhook/sources/{id}/logs/{log_id}`)",
    }),
  },
  { description: 'The lead as `GET /api/v2/leads/{id}` showed it right after this submission was stored' },
)
export type LeadEventData = typeof LeadEventData.static

export const SourceStatusChangedData = t.Object({
  source: SourceRef,
  previous_status: t.String({ examples: ['healthy'] }),
  status: t.String({ examples: ['failing'] }),
  health: t.Record(t.String(), t.Unknown(), {
    description: 'the health summary as `GET /api/webhook/sources/{id}/health` shows it',
  }),
})

export const EndpointDisabledData = t.Object({
  endpoint_id: t.String({ format: 'uuid' }),
  url: t.String(),
  reason: t.String({ examples: ['failing_for_5_days'] }),
  failing_since: Timestamp,
})

export const PatExpiringData = t.Object({
  token_id: t.String({ format: 'uuid' }),
  name: t.String(),
  owner_email: t.String(),
  expires_at: Timestamp,
})

export const PingData = t.Object({
  endpoint_id: t.String({ format: 'uuid' }),
  message: t.String({ examples: ['ping from lead capture'] }),
})

function envelope<Type extends EventType>(type: Type, data: ReturnType<typeof t.Object>, summary: string) {
  return t.Object(
    { type: t.Literal(type), timestamp: Timestamp, data },
    {
      description: `${summary} Sent with \`webhook-id\`, \`webhook-timestamp\` and \`webhook-signature\` (Standard Webhooks).`,
    },
  )
}

/** The body of each event type, for the OpenAPI `webhooks` section. */
export const WEBHOOK_EVENT_SCHEMAS = {
  'lead.created': envelope('lead.created', LeadEventData, 'A new lead was stored.'),
  'lead.updated': envelope(
    'lead.updated',
    LeadEventData,
    'A submission matched an existing lead and updated it.',
  ),
  'source.status_changed': envelope(
    'source.status_changed',
    SourceStatusChangedData,
    "A source's health status changed (healthy → failing is the failure alert).",
  ),
  'endpoint.disabled': envelope(
    'endpoint.disabled',
    EndpointDisabledData,
    'Another endpoint of the organization was disabled after 5 days of failed attempts.',
  ),
  'pat.expiring': envelope('pat.expiring', PatExpiringData, 'A personal access token expires within 7 days.'),
  ping: envelope('ping', PingData, 'Sent by `POST /api/v2/webhook-endpoints/{id}/test`.'),
} as const satisfies Record<EventType, unknown>

export const EndpointDeleted = t.Void({ description: 'Deleted with its pending messages; no body' })
