import { Elysia, t } from 'elysia'
import type { AppContext } from '../../context'
import { withTimeout } from '../../lib/timeout'

const Readiness = t.Object({
  status: t.Union([t.Literal('ready'), t.Literal('not_ready')]),
  draining: t.Boolean(),
  database: t.Object({ engine: t.String(), status: t.Union([t.Literal('up'), t.Literal('down')]) }),
  rate_limiter: t.Object({
    kind: t.String(),
    status: t.Union([t.Literal('up'), t.Literal('degraded')]),
    note: t.Optional(t.String()),
  }),
})

/**
 * After a request was refused because no database connection could be had (server at
 * max_connections, shutting down, unreachable), /readyz stays 503 this long even if its own ping
 * gets through on a connection the pool still holds: the balancer then sends the traffic to
 * replicas that can serve. Long enough for a check every 1 s to see it twice; the replica becomes
 * ready again by itself once such refusals stop.
 */
export const DATABASE_UNAVAILABLE_HOLD_MS = 3000

/** Liveness and readiness probes. Not rate-limited and not logged per request. */
export function healthModule(ctx: AppContext) {
  return new Elysia({ name: 'health', detail: { tags: ['Operations'] } })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: {
        operationId: 'checkLiveness',
        summary: 'Liveness: the process is up',
        description:
          'Answers 200 while the process runs, whatever the database and Redis do. Not rate-limited and not logged.',
        tags: ['Operations'],
      },
    })
    .get(
      '/readyz',
      async ({ status }) => {
        let databaseUp = true
        try {
          await withTimeout(ctx.database.ping(), 2000)
        } catch {
          databaseUp = false
        }
        if (performance.now() - ctx.lifecycle.databaseUnavailableAt < DATABASE_UNAVAILABLE_HOLD_MS) {
          databaseUp = false
        }
        const limiterState = ctx.limiter.state()
        const body = {
          status: (databaseUp && !ctx.lifecycle.draining ? 'ready' : 'not_ready') as 'ready' | 'not_ready',
          draining: ctx.lifecycle.draining,
          database: { engine: ctx.database.engine, status: (databaseUp ? 'up' : 'down') as 'up' | 'down' },
          rate_limiter: {
            kind: ctx.limiter.kind,
            status: limiterState,
            ...(limiterState === 'degraded'
              ? { note: 'redis unreachable: limits enforced per replica by the in-process fallback' }
              : {}),
          },
        }
        return body.status === 'ready' ? body : status(503, body)
      },
      {
        response: { 200: Readiness, 503: Readiness },
        detail: {
          operationId: 'checkReadiness',
          summary:
            'Readiness: database reachable (connections can be had) and not draining (Redis state reported, not fatal)',
          description:
            'For load balancers: 503 while draining after SIGTERM, or while no database connection can be had (held for 3 s after a request was refused for that reason). A Redis outage is reported (`rate_limiter.status: degraded`) but does not make the replica unready. Not rate-limited and not logged.',
          tags: ['Operations'],
        },
      },
    )
}
