import { t } from 'elysia'
import { CUSTOM_FIELDS_MAX_COUNT, LEAD_FIELDS } from '../../lib/contact'
import { ListPage, ListQueryFields, ResourceId } from '../../lib/schemas'

// The same bounds as the inbound path, so an edited lead could also have arrived by webhook.
export { CUSTOM_FIELDS_MAX_COUNT }
export const CUSTOM_FIELDS_MAX_BYTES = 32 * 1024

const example = {
  lead_id: '01975e0c-7b2a-7c3d-8e4f-5a6b7c8d9e0f',
  source_id: '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e',
  first_name: 'Ada',
  last_name: 'Lovelace',
  email: 'ada@example.com',
  phone_raw: '020 7946 0958',
  phone_e164: '+442079460958',
  status: 'new',
  custom_fields: { company: 'Analytical Engines Ltd' },
  attribution: { first_touch: { utm_source: 'newsletter' }, page_url: 'https://example.com/contact' },
  created_at: '2026-01-01T10:00:00.000Z',
  updated_at: '2026-01-01T10:00:00.000Z',
}

const NullableText = t.Union([t.String(), t.Null()])
const Timestamp = t.String({ format: 'date-time' })

export const Lead = t.Object(
  {
    lead_id: t.String({ format: 'uuid' }),
    source_id: t.Union([t.String({ format: 'uuid' }), t.Null()], {
      description: 'the source it came through; null once that source is deleted',
    }),
    first_name: NullableText,
    last_name: NullableText,
    email: NullableText,
    phone_raw: t.Union([t.String(), t.Null()], { description: 'the phone as typed' }),
    phone_e164: t.Union([t.String(), t.Null()], {
      description: "E.164, read with the source's default country; null when it does not parse",
    }),
    status: t.Union([t.String({ maxLength: 50 }), t.Null()], {
      description: 'free text, at most 50 characters',
    }),
    custom_fields: t.Record(t.String(), t.Unknown()),
    attribution: t.Record(t.String(), t.Unknown(), { description: 'as sent by tracker.js' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Lead', description: 'A stored lead', examples: [example] },
)
export type Lead = typeof Lead.static

export const LeadList = ListPage(Lead, { title: 'LeadPage', description: 'A page of leads, newest first' })
export type LeadList = typeof LeadList.static

/** The filters the list and the CSV export share. */
const LeadFilterFields = {
  source_id: t.Optional(t.String({ format: 'uuid', description: 'only leads of this source' })),
  q: t.Optional(
    t.String({
      minLength: 1,
      maxLength: 320,
      description:
        'Matches the e-mail (case-insensitive substring, or exactly after trim + lower-case) or the phone (substring of the typed phone, the same number in E.164, or at least 4 digits inside the E.164 number)',
      examples: ['acme.com', '+44 20 7946 0958'],
    }),
  ),
  created_after: t.Optional(
    t.String({
      format: 'date-time',
      description: 'only leads created strictly after this ISO 8601 instant',
      examples: ['2026-01-01T00:00:00Z'],
    }),
  ),
}

export const LeadListQuery = t.Object({ ...ListQueryFields, ...LeadFilterFields })
export type LeadListQuery = typeof LeadListQuery.static

export const LeadExportQuery = t.Object(LeadFilterFields)
export type LeadExportQuery = typeof LeadExportQuery.static

/** The CSV export's header row, in column order; custom_fields and attribution are JSON text. */
export const LEAD_CSV_COLUMNS = [
  'lead_id',
  'source_id',
  'created_at',
  'updated_at',
  'first_name',
  'last_name',
  'email',
  'phone_raw',
  'phone_e164',
  'status',
  'custom_fields',
  'attribution',
] as const satisfies ReadonlyArray<keyof Lead>

export const LeadIdParams = t.Object({
  id: ResourceId('Lead id (the `lead_id` of the inbound response)'),
})

const editable = (maxLength: number, description: string) =>
  t.Optional(t.Union([t.String({ maxLength }), t.Null()], { description }))

export const UpdateLeadBody = t.Object(
  {
    first_name: editable(LEAD_FIELDS.first_name.maxLength, 'null or empty clears it'),
    last_name: editable(LEAD_FIELDS.last_name.maxLength, 'null or empty clears it'),
    email: editable(
      LEAD_FIELDS.email.maxLength,
      'must be a valid address; another lead of the organization with the same address (any case) is a 409 duplicate_lead',
    ),
    phone_raw: editable(
      LEAD_FIELDS.phone_raw.maxLength,
      "must be a valid phone number, read with the source's default country when it has no +prefix",
    ),
    status: editable(LEAD_FIELDS.status.maxLength, 'free text, at most 50 characters'),
    custom_fields: t.Optional(
      t.Record(t.String(), t.Unknown(), {
        description: `replaces the custom fields as a whole: at most ${CUSTOM_FIELDS_MAX_COUNT} names of 1-100 A-Z a-z 0-9 _ . -, ${CUSTOM_FIELDS_MAX_BYTES / 1024} KB of JSON`,
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'UpdateLeadRequest',
    description:
      'Only the fields sent change. After the change the lead still needs a valid e-mail or phone. A field not listed here is a 400 `validation_failed` naming it.',
    examples: [{ status: 'qualified' }, { email: 'ada@example.org', phone_raw: '+44 20 7946 0000' }],
  },
)
export type UpdateLeadBody = typeof UpdateLeadBody.static
