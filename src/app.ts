import { Elysia } from 'elysia'
import type { AppContext } from './context'
import { canonicalRequest } from './lib/http'
import { RouteTemplates } from './lib/route-templates'
import { authModule } from './modules/auth'
import { dashboardModule } from './modules/dashboard'
import { dashboardErrorPages } from './modules/dashboard/views/layout'
import { deliveryLogsModule } from './modules/delivery-logs'
import { healthModule } from './modules/health'
import { inboundModule } from './modules/inbound'
import { DirectInboundPost } from './modules/inbound/direct-post'
import { leadsModule } from './modules/leads'
import { membersModule } from './modules/members'
import { patModule } from './modules/pat'
import { sourcesModule } from './modules/sources'
import { webhookEndpointsModule } from './modules/webhook-endpoints'
import { webhookEventsDocument } from './modules/webhook-endpoints/openapi'
import { authPlugin } from './plugins/auth'
import { errorResponse, errorsPlugin } from './plugins/errors'
import { inputGuardPlugin } from './plugins/input-guard'
import { openapiPlugin } from './plugins/openapi'
import { rateLimitPlugin } from './plugins/rate-limit'
import { logAccess, requestContextPlugin } from './plugins/request-context'
import { buildServices, type Services } from './services'
import { type BuiltTracker, trackerModule } from './tracker'

/**
 * The root Elysia instance: no listen, no top-level await, so tests import it and call
 * `app.handle(request)`. Order matters: request context, then errors, then the rate limiter (so its
 * headers are known before routing), then the input guard (body size, JSON depth, storable text;
 * after the limiter so its refusals carry the limit headers), then the modules.
 * `options.services` are the replica's services (src/services.ts): src/index.ts builds them once and
 * hands the same ones to its background work (src/jobs.ts), tests get them from makeTestApp;
 * without them the app builds its own. `options.tracker` is the prebuilt tracker.js (src/index.ts
 * builds it before listening, so a broken build stops start-up); without it the script is built on
 * its first request.
 */
export function createApp(ctx: AppContext, options: { services?: Services; tracker?: BuiltTracker } = {}) {
  const services = options.services ?? buildServices(ctx)
  // The limiter runs before routing; it names buckets after the templates of the routes below.
  const routes = new RouteTemplates()
  const registry = services.requests
  const dashboardErrorPage = dashboardErrorPages(ctx.config.publicBasePath)
  const inboundPost = new DirectInboundPost({
    service: services.inbound,
    registry,
    errorResponse: (error, request, headers) =>
      errorResponse(ctx, registry, { error, request, headers, errorPage: dashboardErrorPage }),
    logAccess: (request, status) => logAccess(ctx, registry, request, status),
  })
  // One instance for every module that declares `auth` on its routes.
  const auth = authPlugin(services.credentials)
  const app = new Elysia({
    // Bun answers a body over its cap with a bare 413 (no body, no request id, no rate-limit
    // headers) before the app sees it; the input guard enforces its 1 MiB limit itself with
    // the JSON error, and Bun discards unread bodies without buffering them, so its cap is lifted.
    serve: { maxRequestBodySize: Number.MAX_SAFE_INTEGER },
  })
    // Routing, limits and logs see one path: a relative URL (a request line without Host, as
    // HAProxy's default check sends) or a trailing slash is rewritten before Elysia reads it. The
    // copy has no socket, so the client IP is taken from the original first. Then the webhook POST
    // is served before Elysia's lifecycle (inboundPost); every other request goes through it.
    // The wrapper runs for app.handle and for the routes Bun serves natively alike.
    .wrap((handle) => (request: Request) => {
      const canonical = canonicalRequest(request)
      const target = canonical ?? request
      const apiKey = inboundPost.keyOf(target)
      if (apiKey === null && !canonical) return handle(request)
      const socketAddress = app.server?.requestIP(request)?.address
      if (apiKey !== null) return inboundPost.serve(target, apiKey, socketAddress)
      registry.open(target, socketAddress)
      // Not `handle`: where Bun matched a route natively, `handle` is that route's handler, which
      // reads the path parameters Bun parsed onto the original request, and the copy has none (every
      // route with a parameter answered 400 to a request line without Host). Elysia's router routes
      // the copy by its canonical path; this wrapper then passes it through (it is canonical).
      return app.fetch(target)
    })
    .use(requestContextPlugin(ctx, registry))
    .use(errorsPlugin(ctx, registry, { errorPage: dashboardErrorPage, routes }))
    .use(
      rateLimitPlugin(ctx, {
        registry,
        resolver: services.credentials,
        checkLimit: services.checkLimit,
        routes,
      }),
    )
    .use(inputGuardPlugin(services.inputGuard, routes))
    .use(openapiPlugin(ctx.config, { webhooks: webhookEventsDocument() }))
    .use(healthModule(ctx))
    .use(inboundModule(ctx, services.inbound))
    .use(trackerModule(options.tracker))
    .use(deliveryLogsModule(services.deliveryLogs, auth))
    .use(sourcesModule(services.sources, auth))
    .use(authModule(services.identity, auth))
    .use(leadsModule(ctx, services.leads, auth))
    .use(patModule(services.pat, auth))
    .use(membersModule(services.members, auth))
    .use(webhookEndpointsModule(services.webhookEndpoints, auth))
    .use(dashboardModule(ctx, { service: services.dashboard, resolver: services.credentials }))
  routes.load(app.routes)
  return app
}

export type App = ReturnType<typeof createApp>
