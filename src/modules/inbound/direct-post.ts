import { type RequestRegistry, requestPath } from '../../lib/http'
import { isWebhookLeadPath, WEBHOOK_LEAD_PATH } from './model'
import type { InboundService } from './service'

/**
 * The webhook URL's POST, served by createApp's wrapper before Elysia's request lifecycle.
 *
 * Why: on the route every lead takes, the lifecycle (the context object, three request hooks that
 * return at once for this path, the transform hook, the params and response schemas, the header
 * merge, the after-response hook) cost ~4 µs of the process's CPU per request on a fast machine:
 * 19.4 against 15.5 µs with the service answering at once (`bun run bench:framework`,
 * docs/benchmarks.md A47, which corrects A46's ~30), where all processes spend ~110 µs per lead at
 * saturation. What the lifecycle did for this route is done here, by the same code: the request id
 * and client IP (the registry), the service, the JSON answer with the headers the service wrote, an
 * error rendered by the errors plugin's renderer, the access line.
 *
 * It takes only the requests whose key the lifecycle would hand to the service unchanged: a POST
 * to `/api/webhook/lead/<key>` with no query string and no `%` in the key (a key without one needs
 * no decoding, and a request line's unescaped characters are all storable). A percent-encoded key
 * (whose decoding can fail, or give a NUL) or a query string (whose parameters the input guard
 * checks) goes through the lifecycle as before, to the route the inbound module declares; so do
 * other methods and paths. Real keys are `flwh_` and 38 letters and digits: every lead posted to
 * its webhook URL as the API returns it is served here.
 */
export class DirectInboundPost {
  constructor(
    private readonly deps: {
      service: InboundService
      registry: RequestRegistry
      /** The errors plugin's renderer (src/plugins/errors.ts errorResponse). */
      errorResponse: (error: unknown, request: Request, headers: Record<string, string>) => Response
      /** The request-context plugin's access line (src/plugins/request-context.ts logAccess). */
      logAccess: (request: Request, status: number) => void
    },
  ) {}

  /** The key when this path serves the request, else null (the lifecycle serves it). */
  keyOf(request: Request): string | null {
    if (request.method !== 'POST') return null
    const url = request.url
    if (url.includes('?')) return null
    const path = requestPath(request)
    if (!isWebhookLeadPath(path)) return null
    const key = path.slice(WEBHOOK_LEAD_PATH.length + 1)
    if (key.length === 0 || key.includes('/') || key.includes('%')) return null
    return key
  }

  /** The answer, as the route and the plugins gave it; `socketAddress` is the client's socket. */
  async serve(request: Request, apiKey: string, socketAddress: string | undefined): Promise<Response> {
    const { requestId } = this.deps.registry.open(request, socketAddress)
    const headers: Record<string, string> = { 'x-request-id': requestId }
    let response: Response
    try {
      const outcome = await this.deps.service.receive({ apiKey, request, headers })
      // Elysia's own content type for an object it serialises, so the answer is byte for byte the same.
      headers['content-type'] = 'application/json;charset=utf-8'
      response = new Response(JSON.stringify(outcome), { status: 200, headers })
    } catch (error) {
      response = this.deps.errorResponse(error, request, headers)
    }
    this.deps.logAccess(request, response.status)
    return response
  }
}
