import { t } from 'elysia'
import { PASSWORD_MAX_CHARACTERS, PASSWORD_MIN_CHARACTERS } from '../../lib/passwords'
import { FEATURES, PERMISSIONS, ROLES } from '../../lib/permissions'
import { JsonInteger } from '../../lib/schemas'

export { ErrorBody, RateLimitedBody } from '../../lib/schemas'

// A cheap first bound in UTF-16 units; the rules themselves (code points, 8 to 128, not only
// spaces, not a common password) are lib/passwords.ts, applied by the service.
const PASSWORD_MIN_LENGTH = PASSWORD_MIN_CHARACTERS
const PASSWORD_MAX_LENGTH = PASSWORD_MAX_CHARACTERS * 2

export const Email = t.String({
  format: 'email',
  maxLength: 254,
  description: 'e-mail address; compared trimmed and lower-cased',
  examples: ['ada@example.com'],
})
export const Password = t.String({
  minLength: PASSWORD_MIN_LENGTH,
  maxLength: PASSWORD_MAX_LENGTH,
  description: `${PASSWORD_MIN_CHARACTERS} to ${PASSWORD_MAX_CHARACTERS} characters (Unicode code points), not only spaces, not on the common-password list`,
  examples: ['correct horse battery staple'],
})
export const RoleName = t.UnionEnum(ROLES, {
  description: 'owner | admin | member | viewer',
  examples: ['member'],
})
const PermissionName = t.UnionEnum(PERMISSIONS)
const FeatureName = t.UnionEnum(FEATURES)

const USER_EXAMPLE = {
  id: '0198f3a2-7c1e-7b3a-9d2e-1f4a5b6c7d8e',
  email: 'ada@example.com',
  role: 'owner',
  organization_id: '0198f3a2-7c1d-7e21-8a0b-3c4d5e6f7a8b',
  created_at: '2026-01-01T09:30:00.000Z',
}
const ORGANIZATION_EXAMPLE = {
  id: '0198f3a2-7c1d-7e21-8a0b-3c4d5e6f7a8b',
  name: 'Acme Ltd',
  plan: 'pro',
  features: ['integrations'],
  created_at: '2026-01-01T09:30:00.000Z',
}

export const UserBody = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    email: t.String(),
    role: RoleName,
    organization_id: t.String({ format: 'uuid' }),
    created_at: t.String({ format: 'date-time' }),
  },
  { title: 'User' },
)

export const OrganizationBody = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    name: t.String(),
    plan: t.String({ description: 'free | pro | enterprise', examples: ['pro'] }),
    features: t.Array(FeatureName, { description: 'features of the plan', examples: [['integrations']] }),
    created_at: t.String({ format: 'date-time' }),
  },
  { title: 'Organization' },
)

export const SignupRequest = t.Object(
  {
    email: Email,
    password: Password,
    organization_name: t.String({ minLength: 1, maxLength: 200, examples: ['Acme Ltd'] }),
  },
  {
    title: 'SignupRequest',
    additionalProperties: false,
    examples: [
      { email: 'ada@example.com', password: 'correct horse battery staple', organization_name: 'Acme Ltd' },
    ],
  },
)

export const LoginRequest = t.Object(
  { email: Email, password: t.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH }) },
  {
    title: 'LoginRequest',
    additionalProperties: false,
    examples: [{ email: 'ada@example.com', password: 'correct horse battery staple' }],
  },
)

export const SessionResponse = t.Object(
  {
    token: t.String({
      description: 'the session token (`fl_sess_…`), shown once; send it as `Authorization: Bearer <token>`',
      examples: ['fl_sess_AbCdEfGhIjKlMnOpQrStUvWxYz012345Ab12Cd'],
    }),
    expires_at: t.String({
      format: 'date-time',
      description: 'absolute end of the session (30 days); it also ends after 7 days without use',
    }),
    idle_timeout_seconds: JsonInteger({ description: 'the session ends after this long without use' }),
    user: UserBody,
    organization: OrganizationBody,
  },
  {
    title: 'Session',
    examples: [
      {
        token: 'fl_sess_AbCdEfGhIjKlMnOpQrStUvWxYz012345Ab12Cd',
        expires_at: '2026-01-31T09:30:00.000Z',
        idle_timeout_seconds: 604800,
        user: USER_EXAMPLE,
        organization: ORGANIZATION_EXAMPLE,
      },
    ],
  },
)

export const MeResponse = t.Object(
  {
    user: UserBody,
    organization: OrganizationBody,
    permissions: t.Array(PermissionName, {
      description:
        'effective permissions of this request: the role, narrowed by the PAT scopes when a PAT is used',
    }),
    auth: t.Object({
      kind: t.Union([t.Literal('session'), t.Literal('pat')]),
      credential_id: t.String({ format: 'uuid', description: 'the session id or the PAT token_id' }),
      scopes: t.Union([t.Array(t.String()), t.Null()], { description: 'the PAT scopes; null for a session' }),
    }),
  },
  {
    title: 'CurrentUser',
    examples: [
      {
        user: USER_EXAMPLE,
        organization: ORGANIZATION_EXAMPLE,
        permissions: ['leads.read', 'leads.write', 'leads.delete'],
        auth: { kind: 'pat', credential_id: '0198f3a2-9e0f-7a1b-8c2d-3e4f5a6b7c8d', scopes: ['leads.*'] },
      },
    ],
  },
)

export type SignupInput = typeof SignupRequest.static
export type LoginInput = typeof LoginRequest.static
export type UserView = typeof UserBody.static
export type OrganizationView = typeof OrganizationBody.static
