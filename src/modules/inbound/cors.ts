import type { CachedSource } from '../sources/source-cache'

/**
 * Host of Origin, else of Referer; null when there is none. A browser that sends an Origin says
 * where the request comes from, so Referer is read only when Origin is absent: `Origin: null`
 * (sandboxed iframes, `file:`, data: URLs, some redirects) or any Origin that is not a URL names
 * no host, and a Referer beside it, which the page controls, cannot stand in for it.
 */
export function requestHost(request: Request): string | null {
  const origin = request.headers.get('origin')
  const value = origin ?? request.headers.get('referer')
  if (!value || value === 'null') return null
  try {
    const host = new URL(value).hostname.toLowerCase().replace(/^\[|\]$/g, '')
    return host || null
  } catch {
    return null
  }
}

/** `example.com` matches itself only; `*.example.com` matches any subdomain, not the apex. */
export function hostAllowed(host: string, allowlist: readonly string[]): boolean {
  for (const entry of allowlist) {
    if (entry.startsWith('*.')) {
      if (host.endsWith(entry.slice(1)) && host.length > entry.length - 1) return true
    } else if (host === entry) return true
  }
  return false
}

export interface DomainCheck {
  allowed: boolean
  /** The host the request comes from (requestHost); null when it names none or is not asked. */
  host: string | null
}

// A source without a domain allow list admits every request: answered without allocating.
const NO_DOMAIN_LIST: DomainCheck = Object.freeze({ allowed: true, host: null })

/**
 * The source's domain allow list against the request's host: the one check behind the POST's 403
 * and the preflight's. Without a list every request passes.
 */
export function checkDomain(source: CachedSource, request: Request): DomainCheck {
  if (source.domainAllowlist.length === 0) return NO_DOMAIN_LIST
  const host = requestHost(request)
  return { allowed: host !== null && hostAllowed(host, source.domainAllowlist), host }
}

const EXPOSED_HEADERS =
  'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After'

/**
 * CORS for the webhook URL: `*` when the source has no domain allow list, else the Origin echoed.
 * The echo is sent on refusals too, so a browser script can read why it was refused.
 */
export function corsHeaders(source: CachedSource | null, origin: string | null): Record<string, string> {
  if (!origin) return {}
  // `null` is never echoed: `Access-Control-Allow-Origin: null` would let any sandboxed or file:
  // page read the answer. Without a domain list the answer is `*` anyway.
  if (origin === 'null' && source && source.domainAllowlist.length > 0) return {}
  if (!source || source.domainAllowlist.length === 0) {
    return { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED_HEADERS }
  }
  return {
    'access-control-allow-origin': origin,
    vary: 'Origin',
    'access-control-expose-headers': EXPOSED_HEADERS,
  }
}

/** The CORS headers that withdraw a preflight's permission: a refused origin gets none of them. */
export const CORS_GRANT_HEADERS = ['access-control-allow-origin', 'access-control-expose-headers'] as const

/** The answer to an admitted preflight (a missing Origin is answered as `*`). */
export function preflightHeaders(source: CachedSource, origin: string | null): Record<string, string> {
  return {
    ...corsHeaders(source, origin ?? '*'),
    'access-control-allow-methods': 'POST, GET, OPTIONS',
    'access-control-allow-headers': 'Content-Type, X-Request-Id',
    'access-control-max-age': '600',
  }
}
