import { t } from 'elysia'
import { SCOPES } from '../../lib/permissions'
import { JsonInteger, ListPage, ListQueryFields, ResourceId } from '../../lib/schemas'

export const PAT_NAME_MAX_LENGTH = 100
export const PAT_MAX_SCOPES = 20
export const PAT_MAX_LIFETIME_DAYS = 365

const ScopeList = t.Array(t.String({ minLength: 1, maxLength: 64 }), {
  maxItems: PAT_MAX_SCOPES,
  description: `Recognised scopes: ${SCOPES.map((scope) => `\`${scope}\``).join(', ')}. Empty or absent: the token has the user's own permissions. Otherwise the token's permissions are the intersection of the scopes and the user's permissions (a scope never grants what the user lacks), computed on every request. An unrecognised scope is a 422 \`unknown_scope\`.`,
  examples: [['leads.*'], ['leads.read', 'settings.integrations']],
})

export const CreatePatRequest = t.Object(
  {
    name: t.String({
      minLength: 1,
      maxLength: PAT_NAME_MAX_LENGTH,
      pattern: '\\S',
      description: 'what the token is for (not blank)',
      examples: ['CRM sync'],
    }),
    scopes: t.Optional(ScopeList),
    expires_in_days: t.Optional(
      t.Union([JsonInteger({ minimum: 1, maximum: PAT_MAX_LIFETIME_DAYS }), t.Null()], {
        description: `1 to ${PAT_MAX_LIFETIME_DAYS}; absent or null: the token never expires`,
        examples: [90],
      }),
    ),
  },
  {
    title: 'CreatePersonalAccessTokenRequest',
    additionalProperties: false,
    examples: [{ name: 'CRM sync', scopes: ['leads.*'], expires_in_days: 90 }],
  },
)

const Timestamps = {
  created_at: t.String({ format: 'date-time' }),
  expires_at: t.Union([t.String({ format: 'date-time' }), t.Null()], {
    description: 'null: never expires',
  }),
}

export const CreatedPat = t.Object(
  {
    token_id: t.String({ format: 'uuid', description: 'identifies the token; used to revoke it' }),
    token: t.String({
      description: 'the token (`fl_pat_…`), in plain text this once only; only its digest is stored',
      examples: ['fl_pat_AbCdEfGhIjKlMnOpQrStUvWxYz012345Ab12Cd'],
    }),
    name: t.String(),
    scopes: t.Array(t.String()),
    ...Timestamps,
  },
  {
    title: 'CreatedPersonalAccessToken',
    examples: [
      {
        token_id: '0198f3a2-9e0f-7a1b-8c2d-3e4f5a6b7c8d',
        token: 'fl_pat_AbCdEfGhIjKlMnOpQrStUvWxYz012345Ab12Cd',
        name: 'CRM sync',
        scopes: ['leads.*'],
        created_at: '2026-01-01T09:30:00.000Z',
        expires_at: '2026-04-01T09:30:00.000Z',
      },
    ],
  },
)

export const PatSummary = t.Object(
  {
    token_id: t.String({ format: 'uuid' }),
    name: t.String(),
    masked_token: t.String({
      description: 'prefix and the first and last four characters: enough to recognise, never to use',
      examples: ['fl_pat_AbCd…Cd12'],
    }),
    scopes: t.Array(t.String()),
    status: t.Union([t.Literal('active'), t.Literal('expired')]),
    ...Timestamps,
    last_used_at: t.Union([t.String({ format: 'date-time' }), t.Null()], {
      description: 'last authenticated request, to the minute; null: never used',
    }),
  },
  { title: 'PersonalAccessToken' },
)

export const PatList = ListPage(PatSummary, {
  title: 'PersonalAccessTokenPage',
  examples: [
    {
      data: [
        {
          token_id: '0198f3a2-9e0f-7a1b-8c2d-3e4f5a6b7c8d',
          name: 'CRM sync',
          masked_token: 'fl_pat_AbCd…12Cd',
          scopes: ['leads.*'],
          status: 'active',
          created_at: '2026-01-01T09:30:00.000Z',
          expires_at: '2026-04-01T09:30:00.000Z',
          last_used_at: '2026-01-15T14:02:00.000Z',
        },
      ],
      next_cursor: null,
    },
  ],
})

export const PatListQuery = t.Object(ListQueryFields)

export const PatParams = t.Object({
  token_id: ResourceId('the `token_id` from creation or the listing'),
})

export type CreatePatInput = typeof CreatePatRequest.static
export type PatListQueryInput = typeof PatListQuery.static
export type PatSummaryView = typeof PatSummary.static
