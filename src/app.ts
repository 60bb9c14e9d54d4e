import { Elysia } from 'elysia'
import type { AppContext } from './context'
import { authModule } from './modules/auth'
import { deliveryLogsModule } from './modules/delivery-logs'
import { healthModule } from './modules/health'
import { inboundModule } from './modules/inbound'
import { leadsModule } from './modules/leads'
import { sourcesModule } from './modules/sources'
import { errorsPlugin } from './plugins/errors'
import { openapiPlugin } from './plugins/openapi'
import { rateLimitPlugin } from './plugins/rate-limit'
import { requestContextPlugin } from './plugins/request-context'

/**
 * The root Elysia instance: no listen, no top-level await, so tests import it and call
 * `app.handle(request)`. Order matters: request context, then errors, then the rate limiter (so its
 * headers are known before routing), then the modules.
 */
export function createApp(ctx: AppContext) {
  return new Elysia()
    .use(requestContextPlugin(ctx))
    .use(errorsPlugin(ctx))
    .use(rateLimitPlugin(ctx))
    .use(openapiPlugin())
    .use(healthModule(ctx))
    .use(inboundModule(ctx))
    .use(deliveryLogsModule(ctx))
    .use(sourcesModule(ctx))
    .use(authModule(ctx))
    .use(leadsModule(ctx))
}

export type App = ReturnType<typeof createApp>
