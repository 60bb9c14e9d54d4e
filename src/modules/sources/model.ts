import { t } from 'elysia'
import { JsonInteger, ListPage, ListQueryFields, ResourceId } from '../../lib/schemas'

export const ALLOWLIST_MAX_ENTRIES = 100
export const FIELD_MAPPING_MAX_ENTRIES = 50
/** Lead fields a mapping may target; anything else must be `custom.<name>`. */
export const MAPPING_TARGETS = [
  'first_name',
  'last_name',
  'full_name',
  'phone_raw',
  'email',
  'status',
] as const

const examples = {
  source: {
    id: '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e',
    name: 'Website contact form',
    enabled: true,
    key_hint: 'x9Qz',
    ip_allowlist: ['203.0.113.0/24', '2001:db8::/32'],
    domain_allowlist: ['example.com', '*.example.com'],
    field_mapping: { your_email: 'email', tel: 'phone_raw', company: 'custom.company' },
    default_country: 'DE',
    spam_filter: true,
    created_at: '2026-01-01T10:00:00.000Z',
    updated_at: '2026-01-01T10:00:00.000Z',
    key_rotated_at: null,
    last_request_at: null,
  },
  apiKey: 'flwh_3kT9mQ2xVb7LpR4sW8nY1cF6hJ0dA5eZ1aB2c3',
}

const Timestamp = t.String({ format: 'date-time' })
const NullableTimestamp = t.Union([Timestamp, t.Null()])

const IpAllowlist = t.Array(t.String({ minLength: 1, maxLength: 64 }), {
  maxItems: ALLOWLIST_MAX_ENTRIES,
  description:
    'IPv4/IPv6 addresses and CIDR ranges allowed to post (socket address, or X-Forwarded-For behind a trusted proxy). Empty: any address.',
  examples: [['203.0.113.7', '198.51.100.0/24', '2001:db8::/32']],
})
const DomainAllowlist = t.Array(t.String({ minLength: 1, maxLength: 255 }), {
  maxItems: ALLOWLIST_MAX_ENTRIES,
  description:
    'Hostnames allowed as the host of `Origin` (else `Referer`). `example.com` matches itself only; `*.example.com` matches its subdomains. Stored lower-case. Empty: any origin.',
  examples: [['example.com', '*.example.com']],
})
const FieldMapping = t.Record(t.String({ minLength: 1, maxLength: 100 }), t.String({ maxLength: 107 }), {
  description: `Inbound field name → lead field: \`${MAPPING_TARGETS.join('`, `')}\` or \`custom.<name>\` (name: 1-100 of A-Z a-z 0-9 _ . -). At most ${FIELD_MAPPING_MAX_ENTRIES} entries. Applied before validation.`,
  examples: [{ your_email: 'email', tel: 'phone_raw', company: 'custom.company' }],
})
const DefaultCountry = t.Union([t.String({ minLength: 2, maxLength: 2 }), t.Null()], {
  description:
    'ISO 3166-1 alpha-2 code used to read phone numbers written without a country prefix (case-insensitive, stored upper-case); null for none',
  examples: ['DE'],
})
const Name = t.String({
  minLength: 1,
  maxLength: 200,
  // At least one non-space character; stored trimmed.
  pattern: '\\S',
  description: 'Display name, 1-200 characters (trimmed)',
  examples: ['Website form'],
})

export const SourceRecord = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    name: t.String(),
    enabled: t.Boolean({ description: 'a disabled source answers 404 on its webhook URL' }),
    key_hint: t.String({ description: 'the last 4 characters of the current key' }),
    ip_allowlist: t.Array(t.String()),
    domain_allowlist: t.Array(t.String()),
    field_mapping: t.Record(t.String(), t.String()),
    default_country: t.Union([t.String(), t.Null()]),
    spam_filter: t.Boolean({ description: 'honeypot, links in names, disposable domains, too-fast submits' }),
    created_at: Timestamp,
    updated_at: Timestamp,
    key_rotated_at: NullableTimestamp,
    last_request_at: NullableTimestamp,
  },
  {
    title: 'Source',
    description: 'A webhook source. The key itself is never returned here.',
    examples: [examples.source],
  },
)
export type SourceRecord = typeof SourceRecord.static

const KeyFields = {
  api_key: t.String({
    description: 'The source key, shown only in this response: store it now',
    examples: [examples.apiKey],
  }),
  webhook_url: t.String({
    description: 'PUBLIC_BASE_URL + `/api/webhook/lead/` + api_key: where the form posts',
    examples: [`https://leads.example.com/api/webhook/lead/${examples.apiKey}`],
  }),
}

export const SourceWithKey = t.Object(
  { ...SourceRecord.properties, ...KeyFields },
  {
    title: 'SourceWithKey',
    description: 'The source with its key and webhook URL: returned only at creation and regeneration',
    examples: [
      {
        ...examples.source,
        api_key: examples.apiKey,
        webhook_url: `https://leads.example.com/api/webhook/lead/${examples.apiKey}`,
      },
    ],
  },
)
export type SourceWithKey = typeof SourceWithKey.static

export const SourceList = ListPage(SourceRecord, {
  title: 'SourcePage',
  description: 'A page of sources, newest first',
})
export type SourceList = typeof SourceList.static

export const SourceListQuery = t.Object({
  ...ListQueryFields,
  enabled: t.Optional(t.Boolean({ description: 'only enabled (`true`) or disabled (`false`) sources' })),
})
export type SourceListQuery = typeof SourceListQuery.static

export const SourceIdParams = t.Object({
  id: ResourceId('Source id'),
})

export const CreateSourceBody = t.Object(
  {
    name: Name,
    enabled: t.Optional(t.Boolean({ default: true })),
    ip_allowlist: t.Optional(IpAllowlist),
    domain_allowlist: t.Optional(DomainAllowlist),
    field_mapping: t.Optional(FieldMapping),
    default_country: t.Optional(DefaultCountry),
    spam_filter: t.Optional(t.Boolean({ default: true })),
  },
  {
    additionalProperties: false,
    title: 'CreateSourceRequest',
    description: 'A field not listed here is a 400 `validation_failed` naming it.',
    examples: [
      {
        name: 'Website contact form',
        domain_allowlist: ['example.com', '*.example.com'],
        field_mapping: { your_email: 'email', tel: 'phone_raw' },
        default_country: 'DE',
      },
    ],
  },
)
export type CreateSourceBody = typeof CreateSourceBody.static

export const UpdateSourceBody = t.Object(
  {
    name: t.Optional(Name),
    enabled: t.Optional(t.Boolean()),
    ip_allowlist: t.Optional(IpAllowlist),
    domain_allowlist: t.Optional(DomainAllowlist),
    field_mapping: t.Optional(FieldMapping),
    default_country: t.Optional(DefaultCountry),
    spam_filter: t.Optional(t.Boolean()),
  },
  {
    additionalProperties: false,
    title: 'UpdateSourceRequest',
    description:
      'Only the fields sent change; lists and the mapping are replaced as a whole. A field not listed here is a 400 `validation_failed` naming it.',
    examples: [{ enabled: false }, { ip_allowlist: ['203.0.113.0/24'] }],
  },
)
export type UpdateSourceBody = typeof UpdateSourceBody.static

export const GRACE_SECONDS_MAX = 86_400

export const RegenerateKeyBody = t.Optional(
  t.Object(
    {
      grace_seconds: t.Optional(
        JsonInteger({
          minimum: 0,
          maximum: GRACE_SECONDS_MAX,
          default: 0,
          description:
            'How long the old key keeps working (0: it stops at once). A later regeneration ends any earlier grace window.',
        }),
      ),
    },
    { title: 'RegenerateKeyRequest', additionalProperties: false, examples: [{}, { grace_seconds: 3600 }] },
  ),
)
export type RegenerateKeyBody = typeof RegenerateKeyBody.static
