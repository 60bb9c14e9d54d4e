import type { BuiltTracker } from './build'

/** Browsers revalidate after an hour, so a new deployment reaches every page within one. */
export const TRACKER_CACHE_CONTROL = 'public, max-age=3600'

const COMMON_HEADERS = {
  'cache-control': TRACKER_CACHE_CONTROL,
  // Any website may load the script; it carries nothing secret.
  'access-control-allow-origin': '*',
  // Pages that isolate themselves (COEP) may still load it from another origin.
  'cross-origin-resource-policy': 'cross-origin',
  'x-content-type-options': 'nosniff',
  vary: 'Accept-Encoding',
}

/** The gzip representation has its own validator, as HTTP requires of a different body. */
export function gzipEtag(tracker: BuiltTracker): string {
  return `${tracker.etag.slice(0, -1)}-gzip"`
}

/**
 * 304 when If-None-Match names either representation of this build (or `*`); otherwise the script,
 * gzipped when the client accepts it (precompressed at build time). Weak comparison, as RFC 9110
 * asks for If-None-Match: `W/"x"` matches `"x"`.
 */
export function trackerResponse(
  tracker: BuiltTracker,
  request: { ifNoneMatch?: string; acceptEncoding?: string },
): Response {
  const gzip = acceptsGzip(request.acceptEncoding)
  const etag = gzip ? gzipEtag(tracker) : tracker.etag
  if (request.ifNoneMatch !== undefined && etagMatches(request.ifNoneMatch, tracker)) {
    return new Response(null, { status: 304, headers: { ...COMMON_HEADERS, etag } })
  }
  const headers: Record<string, string> = {
    ...COMMON_HEADERS,
    'content-type': 'application/javascript; charset=utf-8',
    etag,
  }
  if (gzip) headers['content-encoding'] = 'gzip'
  return new Response(gzip ? tracker.gzipped : tracker.code, { status: 200, headers })
}

function etagMatches(header: string, tracker: BuiltTracker): boolean {
  const current = new Set([tracker.etag, gzipEtag(tracker)])
  return header
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .some((tag) => tag === '*' || current.has(tag))
}

/** `gzip` listed without `q=0` (`gzip;q=0` is an explicit refusal). */
export function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false
  return header.split(',').some((part) => {
    const [coding, ...parameters] = part.trim().toLowerCase().split(';')
    if (coding?.trim() !== 'gzip' && coding?.trim() !== 'x-gzip') return false
    const quality = parameters.map((p) => p.trim()).find((p) => p.startsWith('q='))
    return quality === undefined || Number(quality.slice(2)) > 0
  })
}
