import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import {
  isDashboardPath,
  isProbePath,
  isWebhookLeadPath,
  type RequestRegistry,
  requestPath,
  TRACKER_PATH,
} from '../lib/http'
import { platformRule, type RateLimitCheck, type RateLimitRule, WINDOW_MS } from '../lib/rate-limit'
import type { RouteTemplates } from '../lib/route-templates'
import type { CredentialResolver } from '../modules/auth/credentials'

export const MANAGEMENT_LIMIT_PER_MIN = 100

/**
 * Endpoints with a limit tighter than the management default (DESIGN §5). The dashboard's forms
 * that do the same thing share the API route's bucket: signing in through /app is still 10 a minute.
 */
const TIGHTER_LIMITS: Array<{
  method: string
  path: RegExp
  bucket: string
  limit: number
  per: 'ip' | 'user'
}> = [
  { method: 'POST', path: /^\/(api\/auth\/login|app\/sign-in)$/, bucket: 'login', limit: 10, per: 'ip' },
  { method: 'POST', path: /^\/(api\/auth\/signup|app\/sign-up)$/, bucket: 'signup', limit: 5, per: 'ip' },
  { method: 'POST', path: /^\/(api\/pat|app\/tokens)$/, bucket: 'pat_create', limit: 10, per: 'user' },
  {
    method: 'POST',
    path: /^\/(api\/webhook|app)\/sources\/[^/]+\/regenerate-key$/,
    bucket: 'regenerate_key',
    limit: 10,
    per: 'user',
  },
]

/** Paths the global hook leaves alone: probes are never counted; the inbound route limits itself. */
export function isSelfLimitedPath(path: string): boolean {
  return isProbePath(path) || isWebhookLeadPath(path)
}

/**
 * tracker.js is loaded by every visitor of every customer site: many visitors share one IP (office
 * networks, carrier NAT), so a per-IP bucket would cut them off. Only the platform-wide cap applies.
 */
const PLATFORM_ONLY_PATHS = new Set([TRACKER_PATH])
/** The dashboard's scripts and styles: static, cached, loaded by every page view. */
const PLATFORM_ONLY_PREFIX = '/app/assets/'

/**
 * Management traffic: platform-wide bucket plus one bucket per user and endpoint (its route
 * template). Anonymous requests (no valid credential, unmatched paths included) share one bucket
 * per client IP, whatever path they name: their only use is a 401 or a 404, and a key per path
 * would let one client create buckets without bound. Runs before routing, so 404s and 401s carry
 * the headers too.
 */
export function rateLimitPlugin(
  ctx: AppContext,
  {
    registry,
    resolver,
    checkLimit,
    routes,
  }: {
    registry: RequestRegistry
    resolver: CredentialResolver
    checkLimit: RateLimitCheck
    routes: RouteTemplates
  },
) {
  /** The headers go on the response (errors included); a refusal is thrown as the 429. */
  const enforce = async (headers: Record<string, unknown>, rules: RateLimitRule[]) => {
    const decision = await checkLimit(rules)
    Object.assign(headers, decision.headers)
    if (decision.refusal) throw decision.refusal
  }
  return new Elysia({ name: 'rate-limit' }).onRequest(async ({ request, set }) => {
    const path = requestPath(request)
    if (isSelfLimitedPath(path)) return
    if (PLATFORM_ONLY_PATHS.has(path) || path.startsWith(PLATFORM_ONLY_PREFIX)) {
      await enforce(set.headers, [platformRule(ctx)])
      return
    }
    const meta = registry.get(request)
    const tighter = TIGHTER_LIMITS.find((rule) => rule.method === request.method && rule.path.test(path))
    let key = `ip:${meta.clientIp}`
    if (!tighter || tighter.per === 'user') {
      // A database outage must not hide the headers: fall back to the IP as the subject.
      // The dashboard's pages are counted per user like the API: by the session cookie there.
      const authenticating = isDashboardPath(path)
        ? resolver.authenticateSessionCookie(request)
        : resolver.authenticate(request)
      const authentication = await authenticating.catch(() => null)
      if (authentication?.ok) {
        key = `user:${authentication.principal.userId}:${tighter ? tighter.bucket : routes.endpointOf(request.method, path)}`
      } else if (!tighter) key = `ip:${meta.clientIp}:anonymous`
    }
    await enforce(set.headers, [
      platformRule(ctx),
      {
        bucket: tighter ? tighter.bucket : 'management',
        key,
        limit: tighter ? tighter.limit : MANAGEMENT_LIMIT_PER_MIN,
        windowMs: WINDOW_MS,
      },
    ])
  })
}
