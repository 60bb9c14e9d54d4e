import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import { isProbePath, type RequestRegistry, requestPath } from '../lib/http'

/**
 * Request id (accepted from X-Request-Id or generated, always echoed), client IP, and one JSON log
 * line per request. Type-free and global, so it sees every request, unmatched ones included.
 */
export function requestContextPlugin(ctx: AppContext, registry: RequestRegistry) {
  return new Elysia({ name: 'request-context' })
    .onRequest(({ request, set, server }) => {
      const meta = registry.open(request, server?.requestIP(request)?.address)
      set.headers['x-request-id'] = meta.requestId
    })
    .onAfterResponse({ as: 'global' }, ({ request, set }) => {
      const meta = registry.get(request)
      const path = requestPath(request)
      if (isProbePath(path)) return
      ctx.logger.access({
        requestId: meta.requestId,
        method: request.method,
        path,
        status: typeof set.status === 'number' ? set.status : 200,
        durationMs: Math.round((performance.now() - meta.startedAt) * 100) / 100,
        clientIp: meta.clientIp,
      })
    })
}
