import { toOpenAPISchema } from '@elysiajs/openapi'
import { FormatRegistry } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { fullFormats } from 'elysia/type-system/format'
import type { Config } from '../config'
import { finalizeDocument } from '../lib/openapi-document'

// @elysiajs/openapi re-registers TypeBox's string formats (uuid, email, date-time, uri…) globally
// with checks that build a new Zod/Valibot schema on every call; with one shared TypeBox that made
// every `format` check in every request and response several times slower (measured: ~8% of the
// inbound path's CPU). Elysia's own regex/function checks are put back once the plugin has loaded.
for (const [name, check] of Object.entries(fullFormats)) {
  if (check instanceof RegExp) FormatRegistry.Set(name, (value) => check.test(value))
  else if (typeof check === 'function') FormatRegistry.Set(name, check as (value: string) => boolean)
}

const SWAGGER_UI_ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
} as const

const DOCUMENT_INFO = {
  title: 'Lead Capture API',
  version: '1.0.0',
  description: [
    'Inbound lead capture through per-source webhook URLs, source management, source health,',
    'delivery logs, the tracking script and personal access tokens.',
    '',
    'Every response carries `X-Request-Id`; every response but the probes carries `X-RateLimit-Limit`,',
    '`X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds until the sliding window frees a slot) for',
    'the most constraining bucket; a 429 also carries `Retry-After`. Errors have the body',
    '`{ error, message, request_id }` plus fields of their own (`details` on 400; `limit`, `remaining`,',
    '`retry_after` on 429); `error` is one of a closed set of codes, each with one status (the examples',
    'of each error response list the codes it can carry).',
    '',
    'Input limits on every route: bodies up to 1 MiB (102,400 bytes on the inbound route), else 413',
    '`payload_too_large`; JSON nested at most 32 levels, else 400 `invalid_body`; no NUL or unpaired',
    'surrogate in any body value, key, query or path parameter, else 400 `validation_failed` naming it.',
    'An id in a path that is not a UUID is 400 `validation_failed` on every route; a well-formed id that',
    'names nothing of yours is 404.',
  ].join('\n'),
}

/**
 * The OpenAPI 3.1 document at /swagger/json and Swagger UI at /swagger, both served by the service
 * itself: the UI's script and styles come from the pinned `swagger-ui-dist` package (no CDN), so the
 * page works in a private network. The document is Elysia's generation from the route schemas,
 * finished by finalizeDocument; it is built once, on its first request, when every route is known.
 * `webhooks`: the outbound event payloads, published as OpenAPI 3.1 `webhooks` when given.
 */
export function openapiPlugin(
  config: Pick<Config, 'publicBaseUrl' | 'publicBasePath'>,
  options: { webhooks?: Record<string, unknown> } = {},
) {
  const plugin = new Elysia({ name: 'openapi', seed: config.publicBaseUrl })
  let document: object | undefined
  const hidden = { detail: { hide: true } }
  return plugin
    .get(
      '/swagger/json',
      () => {
        document ??= finalizeDocument(
          {
            openapi: '3.1.0',
            info: DOCUMENT_INFO,
            ...TAGS,
            ...mergeComponents(toOpenAPISchema(plugin, { staticFile: false }, undefined, undefined, '3.1.0')),
          },
          { publicBaseUrl: config.publicBaseUrl, webhooks: options.webhooks },
        )
        return document
      },
      hidden,
    )
    .get(
      '/swagger',
      () =>
        new Response(swaggerPage(config.publicBasePath), {
          headers: { 'content-type': 'text/html; charset=utf-8' },
        }),
      hidden,
    )
    .get(
      '/swagger/assets/:file',
      ({ params, status }) => {
        const type = SWAGGER_UI_ASSETS[params.file as keyof typeof SWAGGER_UI_ASSETS]
        if (!type) return status(404, 'not found')
        return new Response(Bun.file(require.resolve(`swagger-ui-dist/${params.file}`)), {
          headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' },
        })
      },
      hidden,
    )
}

function mergeComponents(generated: ReturnType<typeof toOpenAPISchema>) {
  return {
    paths: generated.paths,
    components: { securitySchemes: SECURITY_SCHEMES, schemas: generated.components.schemas },
  }
}

/**
 * Its URLs start with PUBLIC_BASE_URL's path (`basePath`, '' at the root). Not relative ones: the
 * page is also served at `/swagger/` (a trailing slash is the same route), where `swagger/assets/…`
 * resolved to `/swagger/swagger/assets/…`, a 404 and a blank page.
 */
function swaggerPage(basePath: string): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${DOCUMENT_INFO.title}</title>
  <link rel="stylesheet" href="${basePath}/swagger/assets/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${basePath}/swagger/assets/swagger-ui-bundle.js"></script>
  <script>
    // validatorUrl: null, or the page asks validator.swagger.io for a badge.
    window.ui = SwaggerUIBundle({ url: ${JSON.stringify(`${basePath}/swagger/json`)}, dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null })
  </script>
</body>
</html>`
}

const TAGS = {
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
    {
      name: 'Webhook endpoints',
      description: 'Outbound webhooks: endpoints, signing secrets, messages and replays',
    },
    { name: 'Operations', description: 'Probes' },
  ],
}

const SECURITY_SCHEMES = {
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
    description: 'A personal access token (`fl_pat_…`) only: a session token sent here is refused with 401',
  },
}
