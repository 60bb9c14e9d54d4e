import type { Config } from '../../config'
import type { CachedSource } from '../sources/source-cache'
import { MAX_BODY_BYTES } from './body'
import { INBOUND_LIMIT_PER_MIN } from './key-limit'
import { type InboundInfo, WEBHOOK_LEAD_PATH } from './model'
import { CUSTOM_FIELDS_MAX_COUNT, LEAD_FIELDS } from './normalize'

const FIELD_DESCRIPTIONS: Record<keyof typeof LEAD_FIELDS, string> = {
  first_name: 'first name',
  last_name: 'last name',
  full_name: 'full name, split into first and last name when those are absent',
  email: 'e-mail address; a lead with the same address (any case) is updated, not duplicated',
  phone_raw: 'phone number as typed; a lead with the same number (any format) is updated',
  status: 'lead status, free text',
}

/** The document `GET /api/webhook/lead/{api_key}` returns: how to post to this URL. No secret. */
export function describeInbound(source: CachedSource, config: Config): typeof InboundInfo.static {
  return {
    description:
      'POST a JSON object to this URL to send a lead. Management endpoints are documented at the link below.',
    source: { name: source.name, enabled: source.enabled },
    method: 'POST',
    path: `${WEBHOOK_LEAD_PATH}/{api_key}`,
    content_type: 'application/json',
    max_body_bytes: MAX_BODY_BYTES,
    fields: Object.fromEntries(
      Object.entries(LEAD_FIELDS).map(([name, { maxLength }]) => [
        name,
        {
          type: 'string',
          max_length: maxLength,
          description: FIELD_DESCRIPTIONS[name as keyof typeof LEAD_FIELDS],
        },
      ]),
    ),
    require_one_of: ['email', 'phone_raw'],
    field_mapping: source.fieldMapping,
    default_country: source.defaultCountry,
    custom_fields: `other fields are kept as custom fields (at most ${CUSTOM_FIELDS_MAX_COUNT}, within the 100 KB body); fields starting with "_" are not stored`,
    spam_filter: source.spamFilter,
    outcomes: {
      created: '200 {"status":"created","success":true,"lead_id":"…"}: a new lead',
      updated:
        '200 {"status":"updated","success":true,"lead_id":"…"}: a duplicate; the existing lead was updated',
      spam: '200 {"status":"spam","success":true}: flagged as spam, nothing stored',
      error:
        '200 {"status":"error","success":false,"error":"missing_contact"}: neither a valid e-mail nor phone',
    },
    rate_limit: { limit: INBOUND_LIMIT_PER_MIN, window_seconds: 60 },
    example: {
      request: {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: {
          first_name: 'Ada',
          last_name: 'Lovelace',
          email: 'ada@example.com',
          phone_raw: '+44 20 7946 0958',
        },
      },
      response: { status: 'created', success: true, lead_id: '0190a5c2-7c1e-7000-8000-000000000000' },
    },
    documentation_url: `${config.publicBaseUrl}/swagger`,
  }
}
