import { Elysia, t } from 'elysia'
import type { AppContext } from '../../context'
import { describeInbound } from './info'
import {
  ApiKeyParams,
  ErrorBody,
  INBOUND_OUTCOME_EXAMPLES,
  InboundInfo,
  InboundOutcomeBody,
  inboundRequestBody,
  RateLimitedBody,
  WEBHOOK_LEAD_PATH,
} from './model'
import type { InboundService } from './service'

/**
 * The webhook URL. Authenticated only by the source key in the path (spec §5); answers browsers
 * (CORS) and servers alike. The body is read by the service itself (`parse: 'none'`) so that no
 * more than 100 KB is ever buffered. The POST a lead takes (its key as issued, no query string)
 * is served before Elysia's lifecycle by the same service (direct-post.ts, from createApp's
 * wrapper); this route serves its other forms (a percent-encoded key, a query string) and is the
 * contract of them all.
 */
export function inboundModule(ctx: AppContext, service: InboundService) {
  return new Elysia({ name: 'inbound', prefix: WEBHOOK_LEAD_PATH })
    .post(
      '/:api_key',
      ({ params, request, set }) =>
        service.receive({ apiKey: params.api_key, request, headers: set.headers }),
      {
        parse: 'none',
        params: ApiKeyParams,
        response: {
          200: InboundOutcomeBody,
          400: ErrorBody,
          403: ErrorBody,
          404: ErrorBody,
          413: ErrorBody,
          429: RateLimitedBody,
          503: ErrorBody,
        },
        detail: {
          operationId: 'receiveLead',
          tags: ['Inbound'],
          summary: 'Receive a lead',
          description: [
            'Authenticated by the source key in the URL only. The business outcome is in `status`; every accepted',
            'request is a 200. Checks, in order: key (404 for unknown, disabled or malformed keys, one body for all),',
            'rate limit (60 per minute per key, 429 with `Retry-After: 60`), IP allow list and domain allow list',
            '(403 `ip_not_allowed` / `domain_not_allowed`; the domain is the host of `Origin`, else `Referer`),',
            'size (413 over 102,400 bytes), JSON object with `Content-Type: application/json` (400), nesting of at most',
            '32 levels (400 `invalid_body`), no NUL or unpaired surrogate in any value or key (400 `validation_failed`), field mapping,',
            'field types (400 `validation_failed` with `details`), spam filter, contact rule, dedup.',
            'Duplicates: same normalised e-mail in the organization, else same E.164 phone → `updated`, same `lead_id`.',
            '503 `service_unavailable` with `Retry-After` when the database cannot serve in time: down, taking no writes',
            '(a standby), out of a resource, or a lock held elsewhere past `DATABASE_LOCK_TIMEOUT_MS` (nothing stored), or no answer within `INGEST_ANSWER_TIMEOUT_MS`',
            '(the lead may be stored: a retry is merged with it, never stored twice). Retrying after `Retry-After` is safe.',
          ].join(' '),
          requestBody: inboundRequestBody as never,
          'x-responses': {
            200: {
              description: 'The outcome of the submission: every accepted request is a 200',
              content: { 'application/json': { examples: INBOUND_OUTCOME_EXAMPLES } },
            },
          },
        },
      },
    )
    .get(
      '/:api_key',
      async ({ params, request, set }) =>
        describeInbound(
          await service.describeSource({ apiKey: params.api_key, request, headers: set.headers }),
          ctx.config,
        ),
      {
        params: ApiKeyParams,
        response: { 200: InboundInfo, 404: ErrorBody, 429: RateLimitedBody, 503: ErrorBody },
        detail: {
          operationId: 'describeWebhook',
          tags: ['Inbound'],
          summary: 'Describe the expected body (creates nothing)',
          description:
            "Returns how to post to this webhook URL: fields and types, mapped names, outcomes, limits, an example. Counts against the key's rate limit; 404 for a bad key.",
        },
      },
    )
    .options(
      '/:api_key',
      async ({ params, request, set }) => {
        await service.preflight({ apiKey: params.api_key, request, headers: set.headers })
        set.status = 204
      },
      {
        params: ApiKeyParams,
        response: { 204: t.Void(), 403: ErrorBody, 404: ErrorBody, 429: RateLimitedBody },
        detail: {
          operationId: 'preflightWebhook',
          tags: ['Inbound'],
          summary: 'CORS preflight',
          description:
            "Allows the origin when the source has no domain allow list (`*`) or when its host is on it (echoed); otherwise 403 without CORS headers. Counts against the key's rate limit.",
        },
      },
    )
}
