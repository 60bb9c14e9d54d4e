import { newId } from './ids'
import { type Cidr, ipInRanges, parseCidrList, unmapIpv4 } from './ip'

/** What the service knows about one request beyond the Request itself. */
export interface RequestMeta {
  requestId: string
  startedAt: number
  clientIp: string
  /** Set by the rate-limit plugin: the headers to send on every response, errors included. */
  rateLimitHeaders?: Record<string, string>
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

/** Path as it may be logged: secrets in it are masked by the logger, the query string dropped. */
export function pathOf(request: Request): string {
  const url = request.url
  const start = url.indexOf('/', url.indexOf('//') + 2)
  const query = url.indexOf('?', start)
  return start === -1 ? '/' : url.slice(start, query === -1 ? undefined : query)
}
