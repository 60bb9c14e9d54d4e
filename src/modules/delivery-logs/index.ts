import { Elysia } from 'elysia'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import type { AuthPlugin } from '../../plugins/auth'
import { LogEntryWithBody, LogPage, LogParams, LogsQuery, SourceHealth, SourceParams } from './model'
import { type DeliveryLogsService, HEALTH_STATUS_DESCRIPTION } from './service'

const INTEGRATIONS = { permission: 'settings.integrations', feature: 'integrations' } as const
/** The requirement of every logs and health route, for the dashboard's pages. */
export const LOG_ACCESS = INTEGRATIONS

// Every management route answers these besides its 200.
const errorResponses = { ...managementErrors, 404: ErrorBody }

const ACCESS =
  'Needs the permission `settings.integrations` and the plan feature `integrations`; another organization’s source is a 404.'

/**
 * Delivery logs and 24-hour health of a source (DESIGN §8). Mounted beside the sources routes under
 * the same prefix; the logs themselves are written by the inbound module.
 */
export function deliveryLogsModule(service: DeliveryLogsService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'delivery-logs', prefix: '/api/webhook/sources' })
    .use(authPlugin)
    .get(
      '/:id/logs',
      ({ params, query, principal }) => service.list(principal.organizationId, params.id, query),
      {
        auth: INTEGRATIONS,
        params: SourceParams,
        query: LogsQuery,
        response: { 200: LogPage, ...errorResponses },
        detail: {
          operationId: 'listDeliveryLogs',
          tags: ['Health & logs'],
          summary: 'Delivery logs of a source',
          description: [
            'One entry per inbound request that named this source, rejected ones included, newest first.',
            'Filters: `outcome`, `status` (HTTP status of the answer, e.g. 429), `since` (inclusive) and `until`',
            '(exclusive). Identical rejections (429 floods) are one entry per second with `repeat_count`.',
            'Pages: `limit` (default 50, max 200) and the opaque `cursor` from `next_cursor`. Bodies are not',
            'listed; read one entry for its body. Secrets in stored text are masked. Entries older than',
            '`LOG_RETENTION_DAYS` are purged.',
            ACCESS,
          ].join(' '),
        },
      },
    )
    .get(
      '/:id/logs/:log_id',
      ({ params, principal }) => service.get(principal.organizationId, params.id, params.log_id),
      {
        auth: INTEGRATIONS,
        params: LogParams,
        response: { 200: LogEntryWithBody, ...errorResponses },
        detail: {
          operationId: 'getDeliveryLog',
          tags: ['Health & logs'],
          summary: 'One delivery-log entry, with its body',
          description: [
            'The entry with the stored request body: parsed JSON when the body was a complete JSON object or array,',
            'else the stored text (bodies are cut at 8 KB: `body_truncated`). Secrets in it are masked.',
            ACCESS,
          ].join(' '),
        },
      },
    )
    .get('/:id/health', ({ params, principal }) => service.health(principal.organizationId, params.id), {
      auth: INTEGRATIONS,
      params: SourceParams,
      response: { 200: SourceHealth, ...errorResponses },
      detail: {
        operationId: 'getSourceHealth',
        tags: ['Health & logs'],
        summary: '24-hour health of a source',
        description: [
          'Window: the current hour and the 23 before it (24 hourly buckets; `window.from` is the start of the',
          'first, `window.to` is now). Totals by outcome, rejections by reason and HTTP status, success rate,',
          'last request / success / failure, latency p50/p95 (histogram with 8 buckets per doubling: values are',
          'bucket upper bounds, at most 9% above the exact percentile; rate-limited requests are not measured),',
          'and the 10 latest problem deliveries (spam, error, rejected).',
          HEALTH_STATUS_DESCRIPTION,
          ACCESS,
        ].join(' '),
      },
    })
}
