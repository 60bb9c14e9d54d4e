import type { AppContext } from '../../context'
import { creationPosition, decodeCursor, pageOf } from '../../lib/cursor'
import { AppError, errors } from '../../lib/errors'
import { newId } from '../../lib/ids'
import { requireName } from '../../lib/names'
import { isScope, SCOPES } from '../../lib/permissions'
import { DEFAULT_PAGE_SIZE } from '../../lib/schemas'
import { digestSecret, generateSecret, maskFromParts, secretHints } from '../../lib/secrets'
import type { Principal } from '../auth/credentials'
import type { CreatePatInput, PatListQueryInput, PatSummaryView } from './model'
import { insertPat, listUserPats, type PatRow, revokeUserPat } from './repository'

const DAY_MS = 24 * 3600 * 1000

/**
 * Personal access tokens of the calling user. A token belongs to its user: listing and revoking
 * only ever see the caller's own tokens, so another user's (or organization's) token is a 404.
 */
export class PatService {
  constructor(private readonly ctx: AppContext) {}

  async create(principal: Principal, input: CreatePatInput) {
    const scopes = [...new Set(input.scopes ?? [])]
    const unknown = scopes.filter((scope) => !isScope(scope))
    if (unknown.length > 0) {
      throw new AppError(
        'unknown_scope',
        `unrecognised scope${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`,
        { unknown_scopes: unknown, allowed_scopes: [...SCOPES] },
      )
    }
    const now = this.ctx.clock.now()
    const token = generateSecret('pat')
    const hints = secretHints(token)
    const row = await insertPat(this.ctx.db, {
      id: newId(),
      userId: principal.userId,
      organizationId: principal.organizationId,
      name: requireName(input.name, '/name'),
      tokenDigest: digestSecret(token),
      tokenFirst4: hints.first4,
      tokenLast4: hints.last4,
      // Stored as given: the intersection with the role is taken per request, so a later role
      // change narrows or widens the token at once.
      scopes,
      createdAt: new Date(now),
      expiresAt: input.expires_in_days ? new Date(now + input.expires_in_days * DAY_MS) : null,
    })
    return {
      token_id: row.id,
      token,
      name: row.name,
      scopes: row.scopes,
      created_at: row.createdAt.toISOString(),
      expires_at: row.expiresAt?.toISOString() ?? null,
    }
  }

  async list(principal: Principal, query: PatListQueryInput) {
    assertMayManageTokens(principal)
    const limit = query.limit ?? DEFAULT_PAGE_SIZE
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const rows = await listUserPats(this.ctx.db, {
      userId: principal.userId,
      organizationId: principal.organizationId,
      beforeId,
      limit,
    })
    const page = pageOf(rows, limit, creationPosition)
    const now = this.ctx.clock.now()
    return { data: page.rows.map((row) => summaryOf(row, now)), next_cursor: page.nextCursor }
  }

  async revoke(principal: Principal, tokenId: string): Promise<void> {
    // A PAT may always end itself: whoever holds a leaked token can kill it with nothing else.
    if (!(principal.kind === 'pat' && principal.credentialId === tokenId)) assertMayManageTokens(principal)
    const revoked = await revokeUserPat(this.ctx.db, {
      userId: principal.userId,
      organizationId: principal.organizationId,
      tokenId,
      at: new Date(this.ctx.clock.now()),
    })
    if (!revoked) throw errors.notFound('token')
  }
}

/**
 * Seeing and ending your own tokens is never gated by plan or role (spec §3: revocation is
 * immediate): after a downgrade to `free`, or to a role without `settings.integrations`, the
 * user's tokens keep working for what the role still allows, so the user must still be able to
 * revoke them. A session always may; a PAT needs `settings.integrations` in its own effective
 * permissions, so a narrow token (say `leads.read`) cannot list or revoke its siblings.
 */
function assertMayManageTokens(principal: Principal): void {
  if (principal.kind === 'session' || principal.permissions.has('settings.integrations')) return
  throw new AppError('permission_denied', 'the permission "settings.integrations" is required', {
    required_permission: 'settings.integrations',
  })
}

function summaryOf(row: PatRow, now: number): PatSummaryView {
  return {
    token_id: row.id,
    name: row.name,
    masked_token: maskFromParts('pat', row.tokenFirst4, row.tokenLast4),
    scopes: row.scopes,
    status: row.expiresAt && row.expiresAt.getTime() <= now ? 'expired' : 'active',
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt?.toISOString() ?? null,
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
  }
}
