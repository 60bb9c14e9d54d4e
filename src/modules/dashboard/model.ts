import { t } from 'elysia'
import { CSRF_FIELD } from './session'

/**
 * Schemas of the dashboard's routes. Pages answer HTML (a string); a redirect answers an empty
 * body with `Location`. Form fields arrive as text (`application/x-www-form-urlencoded`); every
 * form carries the CSRF token.
 */
export const HtmlPage = t.String({ description: 'text/html page' })
export const Redirect = t.String({ description: 'empty; see Location' })

export const pageResponses = {
  200: HtmlPage,
  303: Redirect,
  400: HtmlPage,
  403: HtmlPage,
  404: HtmlPage,
  409: HtmlPage,
  422: HtmlPage,
} as const

/** Not in the OpenAPI document: the dashboard is not an API (the API's reference stays clean). */
export const hidden = { hide: true } as const

// Optional in the schema so a missing token is the CSRF refusal (403), not a validation error.
const Csrf = { [CSRF_FIELD]: t.Optional(t.String({ maxLength: 200 })) }
const Text = (maxLength: number) => t.String({ maxLength })

export const SignInQuery = t.Object({ next: t.Optional(Text(500)) })
export const SignInForm = t.Object({
  ...Csrf,
  email: Text(254),
  password: Text(256),
  next: t.Optional(Text(500)),
})
export const SignUpForm = t.Object({
  ...Csrf,
  organization_name: Text(200),
  email: Text(254),
  password: Text(256),
})
export const CsrfForm = t.Object(Csrf)

export const IdParams = t.Object({ id: t.String({ maxLength: 100 }) })
export const LogParams = t.Object({ id: t.String({ maxLength: 100 }), log_id: t.String({ maxLength: 100 }) })

export const SourceForm = t.Object({
  ...Csrf,
  name: Text(200),
  enabled: t.Optional(t.Literal('on')),
  spam_filter: t.Optional(t.Literal('on')),
  ip_allowlist: t.Optional(Text(10_000)),
  domain_allowlist: t.Optional(Text(30_000)),
  field_mapping: t.Optional(Text(10_000)),
  default_country: t.Optional(Text(2)),
})
export type SourceForm = typeof SourceForm.static

export const CreateSourceForm = t.Object({ ...Csrf, name: Text(200) })

export const RegenerateForm = t.Object({
  ...Csrf,
  grace_seconds: t.Optional(t.String({ pattern: '^\\d{1,5}$' })),
})

/** After a deletion, the list says what went (Post/Redirect/Get: a reload deletes nothing). */
export const DeletedQuery = { deleted: t.Optional(t.Literal('1')) }

export const SourcesPageQuery = t.Object({ cursor: t.Optional(Text(200)), ...DeletedQuery })

export const LogsPageQuery = t.Object({
  outcome: t.Optional(Text(20)),
  status: t.Optional(Text(3)),
  since: t.Optional(Text(40)),
  until: t.Optional(Text(40)),
  cursor: t.Optional(Text(200)),
})
export type LogsPageQuery = typeof LogsPageQuery.static

export const LeadsPageQuery = t.Object({
  q: t.Optional(Text(320)),
  source_id: t.Optional(Text(100)),
  cursor: t.Optional(Text(200)),
  ...DeletedQuery,
})
export type LeadsPageQuery = typeof LeadsPageQuery.static

export const CreateTokenForm = t.Object({
  ...Csrf,
  name: Text(200),
  scopes: t.Optional(t.Union([Text(50), t.Array(Text(50), { maxItems: 20 })])),
  expires_in_days: t.Optional(t.String({ pattern: '^\\d{0,3}$' })),
})

export const TokenParams = t.Object({ token_id: t.String({ maxLength: 100 }) })

export const AddMemberForm = t.Object({
  ...Csrf,
  email: Text(254),
  password: Text(256),
  role: Text(20),
})

export const LeadForm = t.Object({
  ...Csrf,
  first_name: t.Optional(Text(1000)),
  last_name: t.Optional(Text(1000)),
  email: t.Optional(Text(1000)),
  phone_raw: t.Optional(Text(1000)),
  status: t.Optional(Text(1000)),
  custom_fields: t.Optional(Text(70_000)),
})
export type LeadForm = typeof LeadForm.static

export const MemberParams = t.Object({ user_id: t.String({ maxLength: 100 }) })
export const RoleForm = t.Object({ ...Csrf, role: Text(20) })

export const AssetParams = t.Object({ file: t.String({ maxLength: 100 }) })
