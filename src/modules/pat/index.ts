import { Elysia, t } from 'elysia'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import { CreatedPat, CreatePatRequest, PatList, PatListQuery, PatParams } from './model'
import type { PatService } from './service'

/** The requirements of the token routes, for the dashboard's pages. */
export const PAT_ACCESS = {
  create: { sessionOnly: true, permission: 'settings.integrations', feature: 'integrations' },
  // Your own tokens, on every plan and role: the rule is PatService's (assertMayManageTokens).
  own: true,
} as const

/**
 * Personal access tokens (spec §4.8–4.10, DESIGN §4). Management endpoints: `settings.integrations`
 * and the plan feature `integrations`; creating one needs a session (a PAT cannot mint PATs).
 */
export function patModule(service: PatService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'pat', prefix: '/api/pat' })
    .use(authPlugin)
    .post('', async ({ principal, body, status }) => status(201, await service.create(principal, body)), {
      auth: PAT_ACCESS.create,
      body: CreatePatRequest,
      transform: rejectUnknownFields(CreatePatRequest),
      response: { 201: CreatedPat, ...managementErrors, 422: ErrorBody },
      detail: {
        operationId: 'createPersonalAccessToken',
        tags: ['Personal access tokens'],
        summary: 'Create a personal access token (the value is shown once)',
        description: [
          'Only a session may create a token (a PAT gets 403 `session_required`). The token value is returned in',
          'plain text once; only its SHA-256 digest is stored. `scopes` narrow the user’s permissions (empty: all',
          'of them); wildcards `leads.*`, `settings.*`, `*`; an unrecognised scope is 422 `unknown_scope` with',
          '`unknown_scopes`. `expires_in_days` 1–365, absent or null for a token that never expires.',
          'Send the token as `Authorization: Bearer <token>` or `X-API-Key: <token>`. Limited to 10 per minute per user.',
        ].join(' '),
      },
    })
    .get('', ({ principal, query }) => service.list(principal, query), {
      auth: PAT_ACCESS.own,
      query: PatListQuery,
      response: { 200: PatList, ...managementErrors },
      detail: {
        operationId: 'listPersonalAccessTokens',
        tags: ['Personal access tokens'],
        summary: 'List your personal access tokens (masked)',
        description:
          'The caller’s own live tokens, newest first, masked as `fl_pat_AbCd…WxYz`, with `last_used_at`, `expires_at` and `status` (`active` or `expired`). Revoked tokens are not listed. Cursor pagination: `limit` (default 50, max 200) and `cursor`. Not gated by plan or role: a session always sees its user’s tokens; a PAT needs `settings.integrations`.',
      },
    })
    .delete(
      '/:token_id',
      async ({ principal, params, status }) => {
        await service.revoke(principal, params.token_id)
        return status(204, undefined)
      },
      {
        auth: true,
        params: PatParams,
        response: { 204: t.Void(), ...managementErrors, 404: ErrorBody },
        detail: {
          operationId: 'revokePersonalAccessToken',
          tags: ['Personal access tokens'],
          summary: 'Revoke a personal access token',
          description:
            'Immediate on every replica: the next request with the token gets 401. Only your own tokens: another user’s token, an unknown or an already revoked one is 404. Never gated by plan or role, so a token can be revoked after a downgrade: a session may revoke any of its user’s tokens, a PAT may always revoke itself and others with `settings.integrations`.',
        },
      },
    )
}
