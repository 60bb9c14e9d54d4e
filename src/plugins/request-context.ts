import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import { isManagementPath, isProbePath, type RequestRegistry, requestPath } from '../lib/http'

/**
 * Request id (accepted from X-Request-Id or generated, always echoed), client IP, and one JSON log
 * line per request. Type-free and global, so it sees every request, unmatched ones included.
 */
export function requestContextPlugin(ctx: AppContext, registry: RequestRegistry) {
  return new Elysia({ name: 'request-context' })
    .onRequest(({ request, set, server }) => {
      const meta = registry.open(request, server?.requestIP(request)?.address)
      set.headers['x-request-id'] = meta.requestId
      // Leads, tokens, keys and sessions: no browser or proxy cache may keep an answer of the API.
      if (isManagementPath(requestPath(request))) set.headers['cache-control'] = 'no-store'
    })
    .onAfterResponse({ as: 'global' }, ({ request, set }) => {
      logAccess(ctx, registry, request, typeof set.status === 'number' ? set.status : 200)
    })
}

/**
 * The request's access line (none for the probes). Also written by the webhook POST, which is
 * served before Elysia's lifecycle (src/modules/inbound/direct-post.ts).
 */
export function logAccess(
  ctx: AppContext,
  registry: RequestRegistry,
  request: Request,
  status: number,
): void {
  const path = requestPath(request)
  if (isProbePath(path)) return
  const meta = registry.get(request)
  ctx.logger.access({
    requestId: meta.requestId,
    method: request.method,
    path,
    status,
    durationMs: Math.round((performance.now() - meta.startedAt) * 100) / 100,
    clientIp: meta.clientIp,
  })
}
