import { t } from 'elysia'
import { JsonInteger, ListPage, ListQueryFields, Nullable, ResourceId } from '../../lib/schemas'

export const OUTCOMES = ['created', 'updated', 'spam', 'error', 'rejected'] as const
export type Outcome = (typeof OUTCOMES)[number]

/**
 * The outcomes an entry with HTTP status `status` can have: an answer of 200 is any outcome but
 * `rejected` (a lead stored, spam, a missing contact), any other status is a refusal. The table's
 * delivery_logs_status_outcome_check holds every entry to it, and the log list reads only these
 * outcomes' ranges for a status filter (the status is not in the index).
 */
export function outcomesWithStatus(status: number): Outcome[] {
  return status === 200 ? OUTCOMES.filter((outcome) => outcome !== 'rejected') : ['rejected']
}

// Spelled out (not mapped from OUTCOMES) so the static type keeps the literals.
const outcomeUnion = (options: { description?: string } = {}) =>
  t.Union(
    [
      t.Literal('created'),
      t.Literal('updated'),
      t.Literal('spam'),
      t.Literal('error'),
      t.Literal('rejected'),
    ],
    options,
  )

export const SourceParams = t.Object({ id: ResourceId('The source id') })

export const LogParams = t.Object({
  id: ResourceId('The source id'),
  log_id: ResourceId('The delivery-log entry id'),
})

export const LogsQuery = t.Object({
  ...ListQueryFields,
  // Unlike the other lists, an empty cursor has always been refused here rather than read as "first page".
  cursor: t.Optional(
    t.String({ minLength: 1, maxLength: 200, description: '`next_cursor` of the previous page (opaque)' }),
  ),
  outcome: t.Optional(outcomeUnion({ description: 'Only entries with this outcome' })),
  status: t.Optional(
    t.Integer({
      minimum: 100,
      maximum: 599,
      description:
        'HTTP status of the inbound response, e.g. 429. An entry answered 200 has any outcome but `rejected`; every other status is `rejected`',
    }),
  ),
  since: t.Optional(
    t.String({ format: 'date-time', description: 'Entries received at or after this time (inclusive)' }),
  ),
  until: t.Optional(
    t.String({ format: 'date-time', description: 'Entries received before this time (exclusive)' }),
  ),
})
export type LogsQuery = typeof LogsQuery.static

const outcomeField = outcomeUnion({
  description:
    '`created` / `updated`: a lead was stored; `spam`: accepted and filtered; `error`: no usable contact (200, `success: false`); `rejected`: a 4xx answer (reason = the error code)',
})

const entryFields = {
  id: t.String({ format: 'uuid' }),
  received_at: t.String({ format: 'date-time' }),
  method: t.String({ examples: ['POST'] }),
  http_status: JsonInteger({ examples: [200] }),
  outcome: outcomeField,
  reason: Nullable(
    t.String({
      description:
        'Why: the first spam reason, `missing_contact`, or the error code of a rejection (`rate_limited`, `invalid_json`, `ip_not_allowed`…)',
    }),
  ),
  lead_id: Nullable(t.String({ format: 'uuid' })),
  client_ip: Nullable(t.String()),
  origin: Nullable(t.String({ description: '`Origin`, else `Referer`, of the request (secrets masked)' })),
  user_agent: Nullable(t.String()),
  body_bytes: JsonInteger({ description: 'Size of the request body in bytes' }),
  body_truncated: t.Boolean({ description: 'The stored body was cut at 8 KB' }),
  spam_reasons: t.Array(t.String()),
  duration_ms: t.Number({ description: 'Server-side processing time' }),
  repeat_count: JsonInteger({
    description:
      'How many requests this entry stands for: identical rejections (429 floods) are written once per second with their count',
  }),
}

export const LogEntry = t.Object(entryFields, { title: 'DeliveryLogEntry' })
export type LogEntry = typeof LogEntry.static

export const LogEntryWithBody = t.Object(
  {
    ...entryFields,
    body: t.Union([t.Null(), t.String(), t.Record(t.String(), t.Unknown()), t.Array(t.Unknown())], {
      description:
        'The request body: parsed JSON when it was complete valid JSON, else the stored text (cut at 8 KB); secrets masked',
    }),
  },
  { title: 'DeliveryLogEntryWithBody' },
)
export type LogEntryWithBody = typeof LogEntryWithBody.static

export const LogPage = ListPage(LogEntry, {
  title: 'DeliveryLogPage',
  description: 'A page of delivery-log entries, newest first',
})
export type LogPage = typeof LogPage.static

const outcomeCounts = {
  created: JsonInteger(),
  updated: JsonInteger(),
  spam: JsonInteger(),
  error: JsonInteger(),
  rejected: JsonInteger(),
}

export const HEALTH_STATUSES = ['healthy', 'degraded', 'failing', 'idle', 'disabled'] as const
export type HealthStatus = (typeof HEALTH_STATUSES)[number]

export const SourceHealth = t.Object(
  {
    source_id: t.String({ format: 'uuid' }),
    window: t.Object(
      { from: t.String({ format: 'date-time' }), to: t.String({ format: 'date-time' }) },
      {
        description:
          'The current hour and the 23 before it: `from` is the start of the first hourly bucket, `to` is now',
      },
    ),
    status: t.Union(
      [
        t.Literal('healthy'),
        t.Literal('degraded'),
        t.Literal('failing'),
        t.Literal('idle'),
        t.Literal('disabled'),
      ],
      { description: 'See the rules in the route description' },
    ),
    totals: t.Object(
      { requests: JsonInteger(), ...outcomeCounts },
      { description: 'Requests in the window by outcome' },
    ),
    rejections: t.Array(t.Object({ reason: t.String(), http_status: JsonInteger(), count: JsonInteger() }), {
      description: 'Rejected requests by reason, most frequent first (429s appear as `rate_limited`)',
    }),
    success_rate: Nullable(
      t.Number({
        minimum: 0,
        maximum: 1,
        description: '(created + updated + spam) / requests over the window; null without requests',
      }),
    ),
    last_request_at: Nullable(t.String({ format: 'date-time' })),
    last_success_at: Nullable(t.String({ format: 'date-time' })),
    last_failure: Nullable(
      t.Object({
        at: t.String({ format: 'date-time' }),
        http_status: JsonInteger(),
        reason: Nullable(t.String()),
      }),
    ),
    latency_ms: t.Object(
      {
        p50: Nullable(t.Number()),
        p95: Nullable(t.Number()),
        samples: JsonInteger({ description: 'Requests measured (all but rate-limited ones)' }),
      },
      {
        description:
          'Server-side processing time, from a histogram with 8 buckets per doubling: a value is the upper bound of its bucket, at most 9% above the exact percentile',
      },
    ),
    hourly: t.Array(
      t.Object({
        from: t.String({ format: 'date-time' }),
        to: t.String({ format: 'date-time' }),
        requests: JsonInteger(),
        ...outcomeCounts,
      }),
      { description: '24 buckets, oldest first; the last one is the current (partial) hour' },
    ),
    recent_problems: t.Array(LogEntry, {
      description: 'The 10 latest spam, error and rejected entries (any age within retention), newest first',
    }),
  },
  { title: 'SourceHealth' },
)
export type SourceHealth = typeof SourceHealth.static
