import { t } from 'elysia'
import { JsonInteger } from '../../lib/schemas'

export { ErrorBody, RateLimitedBody } from '../../lib/schemas'

import { CUSTOM_FIELDS_MAX_COUNT, LEAD_FIELDS } from './normalize'

export { isWebhookLeadPath, WEBHOOK_LEAD_PATH } from '../../lib/http'

export const ApiKeyParams = t.Object({
  api_key: t.String({
    description:
      'The source key: `flwh_` and 38 letters and digits, the last 6 a checksum. Shown once, when the source is created or its key regenerated, at the end of its `webhook_url`. A malformed, unknown or disabled key is 404 `webhook_not_found`.',
    examples: ['flwh_3kTq9ZbXw2LmPaR7vYc5NdHe8UfJs4GtKo1B'],
  }),
})

export const InboundOutcomeBody = t.Union(
  [
    t.Object({
      status: t.Union([t.Literal('created'), t.Literal('updated')], {
        description:
          '`created`: a new lead; `updated`: a duplicate (same e-mail, else same phone) was updated',
      }),
      success: t.Literal(true),
      lead_id: t.String({ format: 'uuid' }),
    }),
    t.Object({ status: t.Literal('spam'), success: t.Literal(true) }),
    t.Object({
      status: t.Literal('error'),
      success: t.Literal(false),
      error: t.Literal('missing_contact'),
      message: t.String(),
    }),
  ],
  { title: 'InboundOutcome' },
)

/** One example per outcome of the inbound POST, for the document and Swagger UI. */
export const INBOUND_OUTCOME_EXAMPLES = {
  created: {
    summary: 'a new lead',
    value: { status: 'created', success: true, lead_id: '01970c6e-5b2a-7cc1-8f3e-6d1c2b3a4f50' },
  },
  updated: {
    summary: 'a duplicate (same e-mail, else same phone) was updated',
    value: { status: 'updated', success: true, lead_id: '01970c6e-5b2a-7cc1-8f3e-6d1c2b3a4f50' },
  },
  spam: {
    summary: 'accepted and filtered as spam (nothing stored)',
    value: { status: 'spam', success: true },
  },
  error: {
    summary: 'no usable e-mail or phone',
    value: {
      status: 'error',
      success: false,
      error: 'missing_contact',
      message: 'a lead needs a valid "email" or a "phone_raw" that is a valid phone number',
    },
  },
}

const fieldSchema = (description: string, maxLength: number) => ({
  type: 'string',
  maxLength,
  description,
})

/** OpenAPI description of the inbound body (the route reads the raw body itself to bound its size). */
export const inboundRequestBody = {
  required: true,
  content: {
    'application/json': {
      schema: {
        type: 'object',
        description: `At least one of \`email\` (valid address) or \`phone_raw\` (a valid phone number, read with the source's default country) is required. Other fields become custom fields (at most ${CUSTOM_FIELDS_MAX_COUNT}; bounded in size by the 100 KB body limit); fields starting with \`_\` are signals for the spam filter and are not stored. The source's field mapping is applied first.`,
        properties: {
          first_name: fieldSchema('First name', LEAD_FIELDS.first_name.maxLength),
          last_name: fieldSchema('Last name', LEAD_FIELDS.last_name.maxLength),
          full_name: fieldSchema(
            'Split into first and last name when those are absent',
            LEAD_FIELDS.full_name.maxLength,
          ),
          email: fieldSchema('E-mail; dedup key after trim and lower-case', LEAD_FIELDS.email.maxLength),
          phone_raw: fieldSchema(
            'Phone as typed; dedup key after E.164 normalisation',
            LEAD_FIELDS.phone_raw.maxLength,
          ),
          status: fieldSchema('Lead status, free text', LEAD_FIELDS.status.maxLength),
          page_url: { type: 'string', description: 'Page the form was on (sent by tracker.js)' },
          attribution: {
            type: 'object',
            additionalProperties: true,
            description: 'Attribution (sent by tracker.js): first and last touch, utm_*, click ids, referrer',
          },
          _elapsed_ms: {
            type: 'number',
            description: 'Milliseconds since page load; under 1500 is flagged spam',
          },
          _gotcha: { type: 'string', description: 'Honeypot: must stay empty' },
        },
        additionalProperties: true,
      },
      example: {
        first_name: 'Ada',
        last_name: 'Lovelace',
        email: 'ada@example.com',
        phone_raw: '+44 20 7946 0958',
        status: 'new',
        company: 'Analytical Engines Ltd',
      },
    },
  },
}

export const InboundInfo = t.Object(
  {
    description: t.String(),
    source: t.Object({ name: t.String(), enabled: t.Boolean() }),
    method: t.Literal('POST'),
    path: t.String(),
    content_type: t.Literal('application/json'),
    max_body_bytes: JsonInteger(),
    fields: t.Record(
      t.String(),
      t.Object({ type: t.String(), max_length: JsonInteger(), description: t.String() }),
    ),
    require_one_of: t.Array(t.String()),
    field_mapping: t.Record(t.String(), t.String()),
    default_country: t.Union([t.String(), t.Null()]),
    custom_fields: t.String(),
    spam_filter: t.Boolean(),
    outcomes: t.Record(t.String(), t.String()),
    rate_limit: t.Object({ limit: JsonInteger(), window_seconds: JsonInteger() }),
    example: t.Object({ request: t.Unknown(), response: t.Unknown() }),
    documentation_url: t.String(),
  },
  { title: 'WebhookDescription' },
)
