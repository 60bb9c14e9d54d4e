import { Elysia } from 'elysia'
import type { AppContext } from './context'
import { authModule } from './modules/auth'
import { deliveryLogsModule } from './modules/delivery-logs'
import { healthModule } from './modules/health'
import { inboundModule } from './modules/inbound'
import { leadsModule } from './modules/leads'
import { membersModule } from './modules/members'
import { patModule } from './modules/pat'
import { sourcesModule } from './modules/sources'
import { errorsPlugin } from './plugins/errors'
import { openapiPlugin } from './plugins/openapi'
import { rateLimitPlugin } from './plugins/rate-limit'
import { requestContextPlugin } from './plugins/request-context'
import { type BuiltTracker, trackerModule } from './tracker'

/**
 * The root Elysia instance: no listen, no top-level await, so tests import it and call
 * `app.handle(request)`. Order matters: request context, then errors, then the rate limiter (so its
 * headers are known before routing), then the modules.
 * `options.tracker` is the prebuilt tracker.js (src/index.ts builds it before listening, so a broken
 * build stops start-up); without it the script is built on its first request.
 */
export function createApp(ctx: AppContext, options: { tracker?: BuiltTracker } = {}) {
  return new Elysia()
    .use(requestContextPlugin(ctx))
    .use(errorsPlugin(ctx))
    .use(rateLimitPlugin(ctx))
    .use(openapiPlugin())
    .use(healthModule(ctx))
    .use(inboundModule(ctx))
    .use(trackerModule(ctx, options.tracker))
    .use(deliveryLogsModule(ctx))
    .use(sourcesModule(ctx))
    .use(authModule(ctx))
    .use(leadsModule(ctx))
    .use(patModule(ctx))
    .use(membersModule(ctx))
}

export type App = ReturnType<typeof createApp>
