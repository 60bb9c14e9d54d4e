import { newId } from './ids'
import { type Cidr, ipInRanges, parseCidrList, unmapIpv4 } from './ip'

/** What the service knows about one request beyond the Request itself. */
export interface RequestMeta {
  requestId: string
  startedAt: number
  clientIp: string
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Per-request metadata keyed by the Request object: available in every hook, including onError
 * and onAfterResponse for requests that never matched a route.
 */
export class RequestRegistry {
  private readonly entries = new WeakMap<Request, RequestMeta>()
  private readonly trustedProxies: Cidr[]

  constructor(trustProxy: readonly string[]) {
    this.trustedProxies = parseCidrList(trustProxy)
  }

  open(request: Request, socketAddress: string | undefined): RequestMeta {
    // Already opened by the canonical-path wrapper (createApp), with the socket of the original.
    const existing = this.entries.get(request)
    if (existing) return existing
    const incoming = request.headers.get('x-request-id')
    const meta: RequestMeta = {
      requestId: incoming && REQUEST_ID_PATTERN.test(incoming) ? incoming : newId(),
      startedAt: performance.now(),
      clientIp: this.clientIp(request, socketAddress),
    }
    this.entries.set(request, meta)
    return meta
  }

  get(request: Request): RequestMeta {
    return this.entries.get(request) ?? this.open(request, undefined)
  }

  /**
   * The socket address, unless it is a trusted proxy: then X-Forwarded-For is read from the right,
   * skipping trusted hops, and the first untrusted address is the client. Without a socket (tests
   * calling app.handle) the peer counts as loopback.
   */
  clientIp(request: Request, socketAddress: string | undefined): string {
    let address = unmapIpv4(socketAddress ?? '127.0.0.1')
    if (this.trustedProxies.length === 0 || !ipInRanges(address, this.trustedProxies)) return address
    const forwarded = request.headers.get('x-forwarded-for')
    if (!forwarded) return address
    const hops = forwarded
      .split(',')
      .map((hop) => unmapIpv4(hop.trim()))
      .filter(Boolean)
    for (let index = hops.length - 1; index >= 0; index--) {
      address = hops[index]!
      if (!ipInRanges(address, this.trustedProxies)) return address
    }
    return address
  }
}

/**
 * The canonical path of a request: the one function behind rate limits, probe exemptions and access
 * logs (routing agrees: Bun's router ignores the request-line form and a trailing slash).
 * Bun hands over the request target as written when the request has no Host header (HAProxy's
 * default check is `GET /readyz HTTP/1.0`): `request.url` is then relative (`/readyz`), not
 * `http://host/readyz`. Both forms give the same path; the query string is dropped and trailing
 * slashes are removed, so `/api/auth/login/` counts against the login limit like `/api/auth/login`.
 */
export function requestPath(request: Request): string {
  const url = request.url
  let start: number
  if (url.charCodeAt(0) === 47) start = 0
  else {
    const scheme = url.indexOf('//')
    start = url.indexOf('/', scheme === -1 ? 0 : scheme + 2)
    if (start === -1) return '/'
  }
  let end = url.indexOf('?', start)
  if (end === -1) end = url.length
  while (end - start > 1 && url.charCodeAt(end - 1) === 47) end--
  return url.slice(start, end)
}

/**
 * The request with its URL in canonical form (absolute, path as `requestPath` gives it), or null
 * when it already is: Elysia's router reads the path from `request.url` by position and would
 * misroute a relative URL (`/api/webhook/sources` → `/sources`), so routing must see the same path
 * as limits and logs. Only non-canonical requests (no Host, trailing slash) pay for the copy.
 */
export function canonicalRequest(request: Request): Request | null {
  const url = request.url
  const relative = url.charCodeAt(0) === 47
  const query = url.indexOf('?')
  const end = query === -1 ? url.length : query
  if (!relative && url.charCodeAt(end - 1) !== 47) return null
  const origin = relative ? 'http://localhost' : url.slice(0, url.indexOf('/', url.indexOf('//') + 2))
  const canonical = `${origin}${requestPath(request)}${query === -1 ? '' : url.slice(query)}`
  if (canonical === url) return null
  return new Request(canonical, {
    method: request.method,
    headers: request.headers,
    body: request.body,
    signal: request.signal,
    // A streamed body (the inbound route reads it incrementally) stays a stream.
    duplex: 'half',
  } as RequestInit)
}

/** Liveness and readiness probes: never rate-limited, never logged per request. */
export function isProbePath(path: string): boolean {
  return path === '/healthz' || path === '/readyz'
}

/** The value of one cookie of the request (RFC 6265 `Cookie` header), or null. */
export function cookieValue(request: Request, name: string): string | null {
  const header = request.headers.get('cookie')
  if (!header) return null
  for (const pair of header.split(';')) {
    const separator = pair.indexOf('=')
    if (separator === -1 || pair.slice(0, separator).trim() !== name) continue
    const value = pair.slice(separator + 1).trim()
    return value === '' ? null : value
  }
  return null
}

/** Paths of the browser dashboard: the only place the session cookie is read. */
export function isDashboardPath(path: string): boolean {
  return path === '/app' || path.startsWith('/app/')
}

/**
 * Whether a Content-Type is JSON: `application/json` or `application/<name>+json` (RFC 6839), in any
 * case (media types are case-insensitive, RFC 9110 §8.3.1), with any parameters. The one rule of the
 * webhook URL (400 invalid_content_type) and of the management API (415, src/plugins/input-guard.ts).
 */
export function isJsonContentType(value: string | null): boolean {
  if (!value) return false
  const type = value.split(';', 1)[0]!.trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

/** The webhook URL's path before the key (`/api/webhook/lead/{api_key}`). */
export const WEBHOOK_LEAD_PATH = '/api/webhook/lead'
const WEBHOOK_LEAD_PREFIX = `${WEBHOOK_LEAD_PATH}/`
/** tracker.js, the script websites load: public, cacheable, the same for everyone. */
export const TRACKER_PATH = '/api/webhook/tracker.js'

/**
 * Whether a canonical path is on the webhook URL: its routes read their own body (input guard) and
 * limit themselves (rate-limit plugin), and its POST is served before Elysia's lifecycle.
 */
export function isWebhookLeadPath(path: string): boolean {
  return path.startsWith(WEBHOOK_LEAD_PREFIX)
}

/**
 * The management API: `/api/…` but the webhook URL (its own body, limit and content-type rules) and
 * tracker.js. Its bodies are JSON (src/plugins/input-guard.ts), its queries hold only the
 * parameters a route names (src/lib/route-templates.ts), and its answers are never stored by a
 * cache (src/plugins/request-context.ts).
 */
export function isManagementPath(path: string): boolean {
  return path.startsWith('/api/') && !isWebhookLeadPath(path) && path !== TRACKER_PATH
}
