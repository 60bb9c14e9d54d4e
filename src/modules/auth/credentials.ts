import { and, eq, isNull, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { organizations, personalAccessTokens, sessions, users } from '../../db/schema'
import { cookieValue } from '../../lib/http'
import {
  effectivePermissions,
  type Feature,
  isRole,
  type Permission,
  planFeatures,
  type Role,
} from '../../lib/permissions'
import { digestSecret, digestsEqual, isWellFormedSecret, secretKindOf } from '../../lib/secrets'

/** Sessions end after this long without use, and in any case after SESSION_ABSOLUTE_MS. */
export const SESSION_IDLE_MS = 7 * 24 * 3600 * 1000
export const SESSION_ABSOLUTE_MS = 30 * 24 * 3600 * 1000
// last_used_at is written at most this often per credential, not on every request.
const TOUCH_INTERVAL_MS = 60_000

/**
 * One message for every credential that was sent and refused (malformed, unknown, expired,
 * revoked, of a removed user): telling them apart would confirm to the holder of a leaked token
 * that it was real. The reason stays in `Authentication`, for the code, not for the caller.
 */
export const INVALID_CREDENTIAL_MESSAGE = 'the token is invalid, expired or revoked'

export interface Principal {
  kind: 'session' | 'pat'
  /** The session id or the PAT's token_id. */
  credentialId: string
  userId: string
  organizationId: string
  email: string
  role: Role
  plan: string
  features: Feature[]
  permissions: Set<Permission>
  /** The PAT's scopes; null for a session. */
  scopes: string[] | null
}

export type Authentication =
  | { ok: true; principal: Principal }
  | { ok: false; tokenSent: boolean; reason: 'missing' | 'malformed' | 'unknown' | 'expired' | 'revoked' }

/**
 * Where a credential was sent. `Authorization` takes a session token or a PAT, and only with the
 * `Bearer` scheme (any case); `X-API-Key` takes a PAT only (spec §5, the OpenAPI `apiKeyAuth`
 * scheme). Anything else that was sent is `invalid`: refused like a wrong token, never guessed at.
 */
export type PresentedCredential =
  | { kind: 'none' }
  | { kind: 'invalid' }
  | { kind: 'token'; value: string; header: 'authorization' | 'x-api-key' }

/**
 * The dashboard's session cookie: the same session token the API takes as a bearer token, read
 * only on `/app` (docs/dashboard.md). Never a PAT: those are for servers, not browsers.
 */
export const SESSION_COOKIE = 'lc_session'

const INVALID_PRESENTATION: Authentication = { ok: false, tokenSent: true, reason: 'malformed' }
const NOTHING_PRESENTED: Authentication = { ok: false, tokenSent: false, reason: 'missing' }
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i

/** The credential of a request: `Authorization: Bearer …` first, else `X-API-Key`. */
export function credentialOf(request: Request): PresentedCredential {
  const authorization = request.headers.get('authorization')
  if (authorization !== null && authorization.trim() !== '') {
    const match = BEARER.exec(authorization)
    return match ? { kind: 'token', value: match[1]!, header: 'authorization' } : { kind: 'invalid' }
  }
  const apiKey = request.headers.get('x-api-key')?.trim()
  if (!apiKey) return { kind: 'none' }
  return secretKindOf(apiKey) === 'pat'
    ? { kind: 'token', value: apiKey, header: 'x-api-key' }
    : { kind: 'invalid' }
}

/**
 * Resolves the session or PAT of a request to a principal. Permissions are computed here, per
 * request, from the current role and plan: a role change or revocation applies at once on every
 * replica. The result is memoised per Request, so the rate limiter and the auth macro share it.
 */
export class CredentialResolver {
  private readonly memo = new WeakMap<Request, Promise<Authentication>>()
  private readonly cookieMemo = new WeakMap<Request, Promise<Authentication>>()
  private readonly sessionByDigest
  private readonly patByDigest

  constructor(private readonly ctx: AppContext) {
    const { db } = ctx
    const identity = {
      userId: users.id,
      email: users.email,
      role: users.role,
      organizationId: organizations.id,
      plan: organizations.plan,
    }
    this.sessionByDigest = db
      .select({
        ...identity,
        id: sessions.id,
        digest: sessions.tokenDigest,
        lastUsedAt: sessions.lastUsedAt,
        expiresAt: sessions.expiresAt,
      })
      .from(sessions)
      .innerJoin(users, eq(users.id, sessions.userId))
      .innerJoin(organizations, eq(organizations.id, users.organizationId))
      .where(eq(sessions.tokenDigest, sql.placeholder('digest')))
      .prepare('credential_session_by_digest')
    this.patByDigest = db
      .select({
        ...identity,
        id: personalAccessTokens.id,
        digest: personalAccessTokens.tokenDigest,
        scopes: personalAccessTokens.scopes,
        expiresAt: personalAccessTokens.expiresAt,
        lastUsedAt: personalAccessTokens.lastUsedAt,
        revokedAt: personalAccessTokens.revokedAt,
      })
      .from(personalAccessTokens)
      .innerJoin(users, eq(users.id, personalAccessTokens.userId))
      .innerJoin(organizations, eq(organizations.id, users.organizationId))
      .where(eq(personalAccessTokens.tokenDigest, sql.placeholder('digest')))
      .prepare('credential_pat_by_digest')
  }

  authenticate(request: Request): Promise<Authentication> {
    let pending = this.memo.get(request)
    if (!pending) {
      const presented = credentialOf(request)
      if (presented.kind === 'token') pending = this.resolve(presented.value)
      else if (presented.kind === 'invalid') pending = Promise.resolve(INVALID_PRESENTATION)
      else pending = Promise.resolve(NOTHING_PRESENTED)
      this.memo.set(request, pending)
    }
    return pending
  }

  /**
   * The dashboard's credential: the session cookie, never a header. Memoised per Request like
   * `authenticate`, so the rate limiter and the page macro share one lookup.
   */
  authenticateSessionCookie(request: Request): Promise<Authentication> {
    let pending = this.cookieMemo.get(request)
    if (!pending) {
      const token = cookieValue(request, SESSION_COOKIE)
      if (token === null) pending = Promise.resolve(NOTHING_PRESENTED)
      else if (secretKindOf(token) !== 'session') pending = Promise.resolve(INVALID_PRESENTATION)
      else pending = this.resolve(token)
      this.cookieMemo.set(request, pending)
    }
    return pending
  }

  async resolve(credential: string | null): Promise<Authentication> {
    if (!credential) return { ok: false, tokenSent: false, reason: 'missing' }
    const kind = secretKindOf(credential)
    // Malformed tokens (wrong prefix, length or checksum) are refused before any I/O.
    if ((kind !== 'session' && kind !== 'pat') || !isWellFormedSecret(kind, credential)) {
      return { ok: false, tokenSent: true, reason: 'malformed' }
    }
    const digest = digestSecret(credential)
    const now = this.ctx.clock.now()
    if (kind === 'session') {
      const [row] = await this.sessionByDigest.execute({ digest })
      if (!row || !digestsEqual(row.digest, digest)) return { ok: false, tokenSent: true, reason: 'unknown' }
      if (row.expiresAt.getTime() <= now || row.lastUsedAt.getTime() + SESSION_IDLE_MS <= now) {
        return { ok: false, tokenSent: true, reason: 'expired' }
      }
      if (now - row.lastUsedAt.getTime() > TOUCH_INTERVAL_MS) {
        await this.ctx.db
          .update(sessions)
          .set({ lastUsedAt: new Date(now) })
          .where(eq(sessions.id, row.id))
      }
      return { ok: true, principal: this.principal('session', row, null) }
    }
    const [row] = await this.patByDigest.execute({ digest })
    if (!row || !digestsEqual(row.digest, digest)) return { ok: false, tokenSent: true, reason: 'unknown' }
    if (row.revokedAt) return { ok: false, tokenSent: true, reason: 'revoked' }
    if (row.expiresAt && row.expiresAt.getTime() <= now)
      return { ok: false, tokenSent: true, reason: 'expired' }
    if (!row.lastUsedAt || now - row.lastUsedAt.getTime() > TOUCH_INTERVAL_MS) {
      await this.ctx.db
        .update(personalAccessTokens)
        .set({ lastUsedAt: new Date(now) })
        .where(and(eq(personalAccessTokens.id, row.id), isNull(personalAccessTokens.revokedAt)))
    }
    return { ok: true, principal: this.principal('pat', row, row.scopes) }
  }

  private principal(
    kind: Principal['kind'],
    row: { id: string; userId: string; organizationId: string; email: string; role: string; plan: string },
    scopes: string[] | null,
  ): Principal {
    const role: Role = isRole(row.role) ? row.role : 'viewer'
    return {
      kind,
      credentialId: row.id,
      userId: row.userId,
      organizationId: row.organizationId,
      email: row.email,
      role,
      plan: row.plan,
      features: planFeatures(row.plan),
      permissions: effectivePermissions(role, scopes),
      scopes,
    }
  }
}
