import { openapi } from '@elysiajs/openapi'
import { FormatRegistry } from '@sinclair/typebox'
import { fullFormats } from 'elysia/type-system/format'

// @elysiajs/openapi re-registers TypeBox's string formats (uuid, email, date-time, uri…) globally
// with checks that build a new Zod/Valibot schema on every call; with one shared TypeBox that made
// every `format` check in every request and response several times slower (measured: ~8% of the
// inbound path's CPU). Elysia's own regex/function checks are put back once the plugin has loaded.
for (const [name, check] of Object.entries(fullFormats)) {
  if (check instanceof RegExp) FormatRegistry.Set(name, (value) => check.test(value))
  else if (typeof check === 'function') FormatRegistry.Set(name, check as (value: string) => boolean)
}

/** Swagger UI at /swagger, the OpenAPI document at /swagger/json. */
export function openapiPlugin() {
  return openapi({
    path: '/swagger',
    specPath: '/swagger/json',
    provider: 'swagger-ui',
    // staticFile: false, or paths with a dot (/api/webhook/tracker.js) are left out of the document.
    exclude: { paths: ['/swagger', '/swagger/json'], staticFile: false },
    documentation: {
      info: {
        title: 'Lead Capture API',
        version: '1.0.0',
        description: [
          'Inbound lead capture through per-source webhook URLs, source management, source health,',
          'delivery logs, the tracking script and personal access tokens.',
          '',
          'Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`',
          '(seconds until the sliding window frees a slot) for the most constraining bucket; a 429 also',
          'carries `Retry-After`. Errors have the body `{ error, message, request_id }` plus fields of',
          'their own (`details` on 400; `limit`, `remaining`, `retry_after` on 429).',
          '',
          'Input limits on every route: bodies up to 1 MiB (102,400 bytes on the inbound route), else 413',
          '`payload_too_large`; JSON nested at most 32 levels, else 400 `invalid_body`; no NUL or unpaired',
          'surrogate in any body value, key, query or path parameter, else 400 `validation_failed` naming it.',
        ].join('\n'),
      },
      tags: [
        {
          name: 'Inbound',
          description: 'Receiving leads on a webhook URL (authenticated by the key in the URL)',
        },
        { name: 'Sources', description: 'Webhook sources: keys, allow lists, field mapping' },
        { name: 'Health & logs', description: 'Source health and delivery logs' },
        { name: 'Tracker', description: 'The website tracking script' },
        { name: 'Auth', description: 'Sign-up, log-in and sessions' },
        { name: 'Personal access tokens', description: 'Tokens for server-side integrations' },
        { name: 'Members', description: 'Users of an organization' },
        { name: 'Leads', description: 'Stored leads' },
        { name: 'Operations', description: 'Probes' },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'A session token (`fl_sess_…`) or personal access token (`fl_pat_…`), as `Authorization: Bearer <token>` (the scheme in any case; a token without it is refused with 401)',
          },
          apiKeyAuth: {
            type: 'apiKey',
            in: 'header',
            name: 'X-API-Key',
            description:
              'A personal access token (`fl_pat_…`) only: a session token sent here is refused with 401',
          },
        },
      },
    },
  })
}
