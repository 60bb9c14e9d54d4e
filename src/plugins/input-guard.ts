import { Elysia } from 'elysia'
import { requestPath } from '../lib/http'
import type { InputGuard } from '../lib/input-guard'
import { isWebhookLeadPath } from '../modules/inbound/model'

/**
 * The parse-time guard every route goes through (docs/security.md, "Input limits"):
 * - before routing, a declared Content-Length over 1 MiB is a JSON 413 (Bun's own cap is lifted in
 *   createApp, because Bun answers it with a bare 413: no body, no request id, no rate-limit headers);
 * - the request's body readers, which Elysia's parsers call, read at most 1 MiB (chunked bodies
 *   counted) and refuse JSON nested deeper than 32 levels before JSON.parse;
 * - before any schema or handler, every string and key of the body, query and path parameters must
 *   be storable by PostgreSQL (no NUL, no lone surrogate), else 400 `validation_failed` naming it.
 * The inbound route reads its own body (100 KB limit) and applies the same guard in its service.
 * Registered after the rate limiter, so its refusals carry the rate-limit headers.
 */
export function inputGuardPlugin(guard: InputGuard) {
  return new Elysia({ name: 'input-guard' })
    .onRequest(({ request }) => {
      // The inbound route reads its own body, within its own limit (and logs refusals for the
      // source's owner). A GET's body is never read (Bun hands none over), but an oversized one
      // is still refused like any other.
      if (readsItsOwnBody(request)) return
      guard.checkDeclaredLength(request)
      if (request.body) guard.arm(request)
    })
    .onTransform({ as: 'global' }, ({ request, body, query, params }) => {
      const refusal = guard.refusalOf(request)
      if (refusal) throw refusal
      guard.checkRequest({ body, query, params: params as Record<string, unknown> | undefined })
    })
}

/** The inbound route (`parse: 'none'`) reads its body itself, within its own 100 KB limit. */
function readsItsOwnBody(request: Request): boolean {
  return isWebhookLeadPath(requestPath(request))
}
