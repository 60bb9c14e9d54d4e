import { Elysia } from 'elysia'
import { AppError, errors } from '../lib/errors'
import { isJsonContentType, isManagementPath, isWebhookLeadPath, requestPath } from '../lib/http'
import type { InputGuard } from '../lib/input-guard'
import type { RouteTemplates } from '../lib/route-templates'

/**
 * The parse-time guard every route goes through (docs/security.md, "Input limits"):
 * - before routing, a declared Content-Length over 1 MiB is a JSON 413 (Bun's own cap is lifted in
 *   createApp, because Bun answers it with a bare 413: no body, no request id, no rate-limit headers);
 * - the request's body readers, which Elysia's parsers call, read at most 1 MiB (chunked bodies
 *   counted) and refuse JSON nested deeper than 32 levels before JSON.parse;
 * - before any schema or handler, every string and key of the body, query and path parameters must
 *   be storable by PostgreSQL (no NUL, no lone surrogate), else 400 `validation_failed` naming it;
 * - a management route's query holds only the parameters its schema names, each once
 *   (RouteTemplates.queryProblems), else 400 `validation_failed` naming each.
 * The inbound route reads its own body (100 KB limit) and applies the same guard in its service.
 * Registered after the rate limiter, so its refusals carry the rate-limit headers.
 */
export function inputGuardPlugin(guard: InputGuard, routes: RouteTemplates) {
  return new Elysia({ name: 'input-guard' })
    .onRequest(({ request }) => {
      // The inbound route reads its own body, within its own limit (and logs refusals for the
      // source's owner). A GET's body is never read (Bun hands none over), but an oversized one
      // is still refused like any other.
      const path = requestPath(request)
      // The inbound route (`parse: 'none'`) reads its body itself, within its own 100 KB limit.
      if (isWebhookLeadPath(path)) return
      guard.checkDeclaredLength(request)
      if (!request.body) return
      if (isManagementPath(path)) acceptJsonOnly(request)
      guard.arm(request)
    })
    .onTransform({ as: 'global' }, ({ request, route, body, query, params }) => {
      const refusal = guard.refusalOf(request)
      if (refusal) throw refusal
      const queryProblems = routes.queryProblems(request.method, route, request.url)
      if (queryProblems.length > 0)
        throw errors.validation('the request does not match the schema', queryProblems)
      guard.checkRequest({ body, query, params: params as Record<string, unknown> | undefined })
    })
}

/**
 * A management body is JSON, whatever the spelling of its type: a media type is case-insensitive
 * and may carry parameters (RFC 9110 §8.3.1), and `+json` types are JSON (`application/merge-patch+json`);
 * each is given to Elysia as `application/json`, whose parser would otherwise not read them as JSON.
 * Anything else is 415 naming what to send: a form (what `curl -d` sends unless told otherwise) was
 * parsed as a form and refused with a field named after the whole body, and `text/plain` was read as
 * JSON. A request with no body (no Content-Length, or 0) needs no type.
 */
function acceptJsonOnly(request: Request): void {
  if (request.headers.get('content-length') === '0') return
  const declared = request.headers.get('content-type')
  if (isJsonContentType(declared)) {
    if (declared !== 'application/json') request.headers.set('content-type', 'application/json')
    return
  }
  const got = declared === null ? 'none was sent' : `got ${JSON.stringify(declared.slice(0, 100))}`
  throw new AppError(
    'unsupported_media_type',
    `the body must be JSON sent with Content-Type: application/json (${got})`,
  )
}
