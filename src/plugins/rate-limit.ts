import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import { isDashboardPath, isProbePath, type RequestRegistry, requestPath } from '../lib/http'
import { platformRule, type RateLimitCheck, type RateLimitRule, WINDOW_MS } from '../lib/rate-limit'
import type { CredentialResolver } from '../modules/auth/credentials'
import { isWebhookLeadPath } from '../modules/inbound/model'

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
const PLATFORM_ONLY_PATHS = new Set(['/api/webhook/tracker.js'])
/** The dashboard's scripts and styles: static, cached, loaded by every page view. */
const PLATFORM_ONLY_PREFIX = '/app/assets/'

/**
 * The route templates of the app (`GET /api/webhook/sources/:id/logs`), filled once the app is
 * built (createApp), so a bucket is named after the endpoint a path reaches and never after the
 * path itself: a Redis key must not embed unbounded client input. A path no route matches counts
 * as `unmatched`.
 */
export class RouteTemplates {
  private byMethod = new Map<string, Array<{ pattern: RegExp; template: string }>>()

  load(routes: ReadonlyArray<{ method: string; path: string }>): void {
    const byMethod = new Map<string, Array<{ pattern: RegExp; template: string }>>()
    for (const { method, path } of routes) {
      const canonical = path.length > 1 ? path.replace(/\/+$/, '') : path
      const source = canonical
        .split('/')
        .map((segment) =>
          segment.startsWith(':')
            ? '[^/]+'
            : segment === '*'
              ? '.*'
              : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
        )
        .join('/')
      const list = byMethod.get(method) ?? []
      if (!list.some((entry) => entry.template === canonical)) {
        list.push({ pattern: new RegExp(`^${source}$`), template: canonical })
      }
      byMethod.set(method, list)
    }
    this.byMethod = byMethod
  }

  /**
   * What a path serves, as an Allow header lists it (sorted; HEAD with GET, and OPTIONS), or null
   * when no route has its shape: the errors plugin's 405 for another method (and 204 for OPTIONS).
   * Only asked for a request that matched no route, never on a served one's path.
   */
  allowOf(path: string): string | null {
    const methods = new Set<string>()
    for (const [method, list] of this.byMethod) {
      if (method !== 'ALL' && list.some((entry) => entry.pattern.test(path))) methods.add(method)
    }
    if (methods.size === 0) return null
    if (methods.has('GET')) methods.add('HEAD')
    methods.add('OPTIONS')
    return [...methods].sort().join(', ')
  }

  /** `GET /api/webhook/sources/0190…/logs` → `GET /api/webhook/sources/:id/logs`, else `unmatched`. */
  endpointOf(method: string, path: string): string {
    for (const list of [this.byMethod.get(method), this.byMethod.get('ALL')]) {
      const found = list?.find((entry) => entry.pattern.test(path))
      if (found) return `${method} ${found.template}`
    }
    return 'unmatched'
  }
}

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
