import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import { AppError } from '../lib/errors'
import type { RequestRegistry } from '../lib/http'
import { isDashboardPath, isProbePath, requestPath } from '../lib/http'
import { type RateLimitResult, type RateLimitRule, retryAfterSeconds } from '../lib/rate-limit'
import type { CredentialResolver } from '../modules/auth/credentials'

export const WINDOW_MS = 60_000
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
  return isProbePath(path) || path.startsWith('/api/webhook/lead/')
}

/**
 * tracker.js is loaded by every visitor of every customer site: many visitors share one IP (office
 * networks, carrier NAT), so a per-IP bucket would cut them off. Only the platform-wide cap applies.
 */
const PLATFORM_ONLY_PATHS = new Set(['/api/webhook/tracker.js'])
/** The dashboard's scripts and styles: static, cached, loaded by every page view. */
const PLATFORM_ONLY_PREFIX = '/app/assets/'

export function platformRule(ctx: AppContext): RateLimitRule {
  return { bucket: 'platform', key: 'all', limit: ctx.config.platformRateLimitPerMin, windowMs: WINDOW_MS }
}

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

  /** `GET /api/webhook/sources/0190…/logs` → `GET /api/webhook/sources/:id/logs`, else `unmatched`. */
  endpointOf(method: string, path: string): string {
    for (const list of [this.byMethod.get(method), this.byMethod.get('ALL')]) {
      const found = list?.find((entry) => entry.pattern.test(path))
      if (found) return `${method} ${found.template}`
    }
    return 'unmatched'
  }
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  const { decisive } = result
  const headers: Record<string, string> = {
    'x-ratelimit-limit': String(decisive.limit),
    'x-ratelimit-remaining': String(decisive.remaining),
    'x-ratelimit-reset': String(Math.ceil(decisive.resetMs / 1000)),
  }
  if (!result.allowed) headers['retry-after'] = String(retryAfterSeconds(decisive))
  return headers
}

export function rateLimitedError(result: RateLimitResult): AppError {
  const retryAfter = retryAfterSeconds(result.decisive)
  return new AppError(
    'rate_limited',
    `rate limit exceeded: at most ${result.decisive.limit} requests per minute; retry in ${retryAfter} s`,
    { limit: result.decisive.limit, remaining: result.decisive.remaining, retry_after: retryAfter },
    rateLimitHeaders(result),
  )
}

/**
 * Checks the rules in one limiter call, records the headers for the response (success or error),
 * and throws 429 when any bucket refuses.
 */
export async function enforceRateLimit(
  ctx: AppContext,
  registry: RequestRegistry,
  request: Request,
  headers: Record<string, unknown>,
  rules: RateLimitRule[],
): Promise<RateLimitResult> {
  const result = await ctx.limiter.check(rules, ctx.clock.now())
  const limitHeaders = rateLimitHeaders(result)
  registry.get(request).rateLimitHeaders = limitHeaders
  Object.assign(headers, limitHeaders)
  if (!result.allowed) throw rateLimitedError(result)
  return result
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
    routes,
  }: { registry: RequestRegistry; resolver: CredentialResolver; routes: RouteTemplates },
) {
  return new Elysia({ name: 'rate-limit' }).onRequest(async ({ request, set }) => {
    const path = requestPath(request)
    if (isSelfLimitedPath(path)) return
    if (PLATFORM_ONLY_PATHS.has(path) || path.startsWith(PLATFORM_ONLY_PREFIX)) {
      await enforceRateLimit(ctx, registry, request, set.headers, [platformRule(ctx)])
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
    await enforceRateLimit(ctx, registry, request, set.headers, [
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
