import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import type { AppContext } from '../../context'
import { AppError } from '../../lib/errors'
import { cookieValue } from '../../lib/http'
import { type AuthRequirement, authorize } from '../../plugins/auth'
import {
  type CredentialResolver,
  type Principal,
  SESSION_ABSOLUTE_MS,
  SESSION_COOKIE,
} from '../auth/credentials'
import { renderErrorPage } from './views/layout'

/**
 * Browser sessions for /app (docs/dashboard.md). The cookie holds the same session token the API
 * issues; JavaScript never sees it (HttpOnly), other sites never send it (SameSite=Strict), and it
 * is scoped to /app, where it is the only credential read: the API stays bearer-only.
 *
 * CSRF, two layers on every state-changing request:
 * - `Origin` (else `Referer`) must be this service: PUBLIC_BASE_URL's origin or the request's own;
 * - a token in the form (`_csrf`) or the `X-CSRF-Token` header: for a signed-in user an HMAC of the
 *   session token (nothing stored, different per session, useless without the cookie it derives
 *   from); before sign-in, a random value also set as the HttpOnly cookie `lc_csrf` (double submit),
 *   so a cross-site page cannot sign a victim into the attacker's account either.
 */
export const PRE_SESSION_CSRF_COOKIE = 'lc_csrf'
export const CSRF_FIELD = '_csrf'
export const CSRF_HEADER = 'x-csrf-token'
export const DASHBOARD_PATH = '/app'
export const SIGN_IN_PATH = '/app/sign-in'

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/**
 * A dashboard path (`/app/sources`) as the browser must ask for it: under PUBLIC_BASE_URL's path
 * when a proxy serves the service below one and strips it (config.publicBasePath).
 */
export function browserPath(config: Pick<AppContext['config'], 'publicBasePath'>, path: string): string {
  return `${config.publicBasePath}${path}`
}

function cookieAttributes(config: AppContext['config'], maxAgeSeconds: number): string {
  const secure = config.publicBaseUrl.startsWith('https://') ? '; Secure' : ''
  return `Path=${browserPath(config, DASHBOARD_PATH)}; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`
}

export function sessionCookie(config: AppContext['config'], token: string): string {
  return `${SESSION_COOKIE}=${token}; ${cookieAttributes(config, SESSION_ABSOLUTE_MS / 1000)}`
}

export function clearedSessionCookie(config: AppContext['config']): string {
  return `${SESSION_COOKIE}=; ${cookieAttributes(config, 0)}`
}

export function preSessionCsrfCookie(config: AppContext['config'], value: string): string {
  return `${PRE_SESSION_CSRF_COOKIE}=${value}; ${cookieAttributes(config, 3600)}`
}

/** The CSRF token of a session: derived from its token, so it is never stored. */
export function sessionCsrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('lead-capture dashboard csrf').digest('base64url')
}

/** A fresh value for the pre-session double-submit cookie: a nonce, not a credential. */
export function newPreSessionCsrfValue(): string {
  return randomBytes(24).toString('base64url')
}

function tokensEqual(left: string | null | undefined, right: string | null | undefined): boolean {
  if (!left || !right) return false
  const a = Buffer.from(left)
  const b = Buffer.from(right)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** `Origin`, else the origin of `Referer`; null when neither is sent or parses. */
function originOf(request: Request): string | null {
  const origin = request.headers.get('origin')
  if (origin && origin !== 'null') return origin
  const referer = request.headers.get('referer')
  if (!referer) return null
  try {
    return new URL(referer).origin
  } catch {
    return null
  }
}

/**
 * The request comes from this service's own pages. The request's own origin is accepted besides
 * PUBLIC_BASE_URL's because a browser sends both itself (a cross-site page cannot choose our Host
 * and its Origin at once); PUBLIC_BASE_URL covers a TLS-terminating proxy in front.
 */
export function isSameOrigin(config: AppContext['config'], request: Request): boolean {
  const origin = originOf(request)
  if (!origin) return false
  return origin === new URL(config.publicBaseUrl).origin || origin === new URL(request.url).origin
}

function csrfTokenSent(request: Request, body: unknown): string | null {
  const header = request.headers.get(CSRF_HEADER)
  if (header) return header
  if (body && typeof body === 'object' && CSRF_FIELD in body) {
    const value = (body as Record<string, unknown>)[CSRF_FIELD]
    return typeof value === 'string' ? value : null
  }
  return null
}

/** Why a state-changing request is refused, or null when its origin and token check out. */
export function csrfProblem(
  config: AppContext['config'],
  request: Request,
  body: unknown,
  expectedToken: string | null,
): string | null {
  if (SAFE_METHODS.has(request.method)) return null
  if (!isSameOrigin(config, request)) return 'the request did not come from this site (Origin check)'
  if (!tokensEqual(csrfTokenSent(request, body), expectedToken)) {
    return 'the form has expired or did not come from this site; reload the page and try again'
  }
  return null
}

export function signInLocation(path: string): string {
  return path === DASHBOARD_PATH ? SIGN_IN_PATH : `${SIGN_IN_PATH}?next=${encodeURIComponent(path)}`
}

/** The longest `next` the sign-in's query and form take (SignInQuery, SignInForm). */
const MAX_NEXT_CHARS = 500

/**
 * Where a sign-in goes back to for a request that found no session (it expired, or was signed out in
 * another tab): a GET's own page with its query (a search, a filtered log), or its path alone when
 * the two would not fit in `next`; a form's POST, the page the form was on (its Referer, when that
 * is a page of this dashboard), else the dashboard's home. Not the POST's own path: that is no page,
 * and the sign-in would end on a 404 with the user's input lost.
 */
export function returnPathOf(config: AppContext['config'], request: Request, path: string): string {
  if (SAFE_METHODS.has(request.method)) {
    const withQuery = `${path}${new URL(request.url).search}`
    return withQuery.length <= MAX_NEXT_CHARS ? withQuery : path
  }
  const referer = request.headers.get('referer')
  if (!referer || !URL.canParse(referer)) return DASHBOARD_PATH
  const page = new URL(referer)
  const ownOrigins = [new URL(config.publicBaseUrl).origin, new URL(request.url).origin]
  if (!ownOrigins.includes(page.origin) || !page.pathname.startsWith(`${config.publicBasePath}/`)) {
    return DASHBOARD_PATH
  }
  const candidate = `${page.pathname.slice(config.publicBasePath.length)}${page.search}`
  return candidate.length <= MAX_NEXT_CHARS ? safeNext(candidate) : DASHBOARD_PATH
}

/** A `next` a sign-in may go back to: a dashboard path, never another site. */
export function safeNext(next: string | undefined): string {
  return next && /^\/app(\/[A-Za-z0-9/_.-]*)?(\?[^\\]*)?$/.test(next) && !next.includes('..')
    ? next
    : DASHBOARD_PATH
}

export interface PageSession {
  principal: Principal
  csrfToken: string
  /** config.publicBasePath: every URL the page hands the browser starts with it. */
  basePath: string
}

/**
 * The `page` macro: the dashboard's counterpart of the API's `auth` macro, with the same
 * requirement and the same `authorize`. Not signed in (or the session expired or was revoked):
 * 303 to the sign-in page, the stale cookie cleared. Signed in without the permission or plan
 * feature: a 403 page. A state-changing request without the right Origin and CSRF token: a 403
 * page, before the handler runs.
 */
export function dashboardSessionPlugin(ctx: AppContext, resolver: CredentialResolver) {
  return new Elysia({ name: 'dashboard-session' }).macro({
    page: (requirement: AuthRequirement | true) => ({
      async resolve({ request, body, path, set, status }) {
        const authentication = await resolver.authenticateSessionCookie(request)
        set.headers['cache-control'] = 'no-store'
        if (!authentication.ok) {
          if (authentication.tokenSent) set.headers['set-cookie'] = clearedSessionCookie(ctx.config)
          set.headers.location = browserPath(
            ctx.config,
            signInLocation(returnPathOf(ctx.config, request, path)),
          )
          return status(303, '')
        }
        const token = cookieValue(request, SESSION_COOKIE)!
        const session: PageSession = {
          principal: authentication.principal,
          csrfToken: sessionCsrfToken(token),
          basePath: ctx.config.publicBasePath,
        }
        set.headers['content-type'] = 'text/html; charset=utf-8'
        const problem = csrfProblem(ctx.config, request, body, session.csrfToken)
        if (problem) return status(403, renderErrorPage(403, problem, { session }))
        try {
          authorize(authentication, requirement)
        } catch (error) {
          if (error instanceof AppError) return status(403, renderErrorPage(403, error.message, { session }))
          throw error
        }
        return { session, principal: session.principal }
      },
    }),
  })
}
