import { ERROR_CODES, type ErrorCode } from './errors'
import { isManagementPath } from './http'

/**
 * The last step before the OpenAPI document is published (GET /swagger/json). Elysia's generator
 * gets most of it from the route schemas; what it cannot express, or expresses in a way that
 * validators and client generators refuse, is settled here, once, for every route:
 *
 * - schemas with a `title` (set in the modules' model.ts) become named `components.schemas` and are
 *   referenced, so generators emit `Lead`, `Source`, `Error`… instead of anonymous shapes;
 * - Elysia's query integers (`t.Integer`, which parses the text) are published as
 *   `anyOf: [numeric string, integer]`: on the wire they are integers, so the integer is kept;
 * - 204 and 304 have no content (Elysia writes `t.Void()` as media types named `type`);
 * - bodies are documented as JSON only (Elysia also lists form encodings, which cannot carry the
 *   nested fields and are not part of the contract);
 * - response headers: `X-Request-Id` everywhere, the rate-limit headers where a limiter runs,
 *   `Retry-After` on 429/503, `WWW-Authenticate` on 401;
 * - error responses get one example per code their status can carry (the table in errors.ts);
 * - `servers` from PUBLIC_BASE_URL, `security: []` on public routes;
 * - route-level extensions a `detail` can carry, because Elysia overwrites `responses` and
 *   `requestBody` with what it generates: `x-optional-body` (the body may be left out) and
 *   `x-responses` (merged into the generated responses: another media type, more headers, examples).
 *
 * `webhooks` is where the outbound event payloads go once they exist (OpenAPI 3.1 `webhooks`).
 */
export interface FinalizeOptions {
  publicBaseUrl: string
  webhooks?: Record<string, unknown>
}

type Json = Record<string, unknown>
type Operation = {
  operationId?: string
  tags?: string[]
  security?: unknown[]
  requestBody?: { required?: boolean; content?: Record<string, unknown> }
  responses?: Record<string, ResponseObject>
  parameters?: Array<{ in: string; name: string; schema?: Json }>
  'x-optional-body'?: boolean
  'x-responses'?: Record<string, ResponseObject>
}
type ResponseObject = {
  description?: string
  headers?: Record<string, unknown>
  content?: Record<string, { schema?: Json; examples?: Record<string, unknown> }>
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const
/** Methods whose requests carry a body the input guard checks (Bun hands a GET's over to no one). */
const BODY_METHODS = new Set<string>(['put', 'post', 'delete', 'patch'])
const EMPTY_STATUSES = new Set(['204', '304'])
/** Probes answer without the limiter (src/plugins/rate-limit.ts isProbePath). */
const UNLIMITED_PATHS = new Set(['/healthz', '/readyz'])

export const RESPONSE_HEADERS = {
  'X-Request-Id': {
    description:
      'The request id (the one sent, when it was a safe token; else a new UUID), also in error bodies',
    required: true,
    schema: { type: 'string' },
  },
  'X-RateLimit-Limit': {
    description: 'Requests allowed per window by the most constraining bucket',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests left in the window of that bucket',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Reset': {
    description: 'Seconds until the sliding window frees a slot',
    schema: { type: 'integer' },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying',
    required: true,
    schema: { type: 'integer' },
  },
  'Cache-Control': {
    description: '`no-store`: no browser or proxy cache keeps an answer of the management API',
    required: true,
    schema: { type: 'string', examples: ['no-store'] },
  },
  'WWW-Authenticate': {
    description: 'The Bearer challenge (`error="invalid_token"` when a credential was sent and refused)',
    required: true,
    schema: { type: 'string' },
  },
} as const

type HeaderName = keyof typeof RESPONSE_HEADERS

const INPUT_GUARD_REFUSALS = [
  ['400', 'The input guard refused a parameter or the body (NUL or unpaired surrogate, JSON too deep)'],
  ['413', 'The declared body is larger than the limit'],
] as const

export function finalizeDocument<T extends object>(generated: T, options: FinalizeOptions): T {
  const document = structuredClone(generated) as Json & {
    paths: Record<string, Record<string, Operation>>
    components?: Json & { schemas?: Record<string, Json>; headers?: Json }
  }
  document.servers = [{ url: options.publicBaseUrl, description: 'This deployment (PUBLIC_BASE_URL)' }]
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      const operation = item[method]
      if (operation) finalizeOperation(path, method, operation)
    }
  }
  const named: Record<string, Json> = {}
  document.paths = rewriteSchemas(document.paths, named) as typeof document.paths
  document.components = {
    ...document.components,
    schemas: { ...document.components?.schemas, ...named },
    headers: Object.fromEntries(
      Object.entries(RESPONSE_HEADERS).map(([name, header]) => [name, { ...header }]),
    ),
  }
  if (options.webhooks && Object.keys(options.webhooks).length > 0) document.webhooks = options.webhooks
  return document as T
}

function finalizeOperation(path: string, method: string, operation: Operation): void {
  if (!operation.operationId || /[^A-Za-z0-9]/.test(operation.operationId)) {
    throw new Error(`${method.toUpperCase()} ${path}: set detail.operationId to a camelCase name`)
  }
  operation.security ??= []
  if (operation.requestBody?.content) {
    const json = operation.requestBody.content['application/json']
    operation.requestBody.content = json ? { 'application/json': json } : operation.requestBody.content
    if (operation['x-optional-body']) operation.requestBody.required = false
  }
  delete operation['x-optional-body']
  const extra = operation['x-responses'] ?? {}
  delete operation['x-responses']
  operation.responses ??= {}
  const responses = operation.responses
  // The input guard runs before every route (src/plugins/input-guard.ts): a declared body over
  // 1 MiB is 413, and a NUL or lone surrogate in a parameter or too deep a JSON body is 400.
  for (const [status, description] of INPUT_GUARD_REFUSALS) {
    responses[status] ??= {
      description,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    }
  }
  // A management body that is not JSON (src/plugins/input-guard.ts acceptJsonOnly), on every method
  // that carries one, whether the operation reads it or not; the inbound route reads its own body
  // and answers 400 invalid_content_type instead.
  if (BODY_METHODS.has(method) && !operation.tags?.includes('Inbound')) {
    responses['415'] ??= {
      description: 'The body is not JSON: send it with `Content-Type: application/json`',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    }
  }
  for (const [status, response] of Object.entries(responses)) {
    const addition = extra[status]
    if (addition) {
      if (addition.description) response.description = addition.description
      // The addition's media types replace the generated ones; one in both keeps the generated schema.
      if (addition.content) {
        const generatedContent = response.content ?? {}
        response.content = Object.fromEntries(
          Object.entries(addition.content).map(([type, media]) => [
            type,
            { ...generatedContent[type], ...media },
          ]),
        )
      }
      response.headers = { ...response.headers, ...addition.headers }
    }
    if (EMPTY_STATUSES.has(status) || (response.content && 'type' in response.content))
      delete response.content
    response.headers = { ...headersFor(path, status), ...response.headers }
    const examples = errorExamples(status, operation.tags?.includes('Inbound') ? 'inbound' : 'management')
    const json = response.content?.['application/json']
    const schemaName =
      json?.schema?.title ??
      String(json?.schema?.$ref ?? '')
        .split('/')
        .pop()
    const isErrorBody = schemaName === 'Error' || schemaName === 'RateLimitedError'
    if (examples && json && isErrorBody) json.examples = examples
  }
}

function headersFor(path: string, status: string): Record<string, unknown> {
  const names: HeaderName[] = ['X-Request-Id']
  if (!UNLIMITED_PATHS.has(path))
    names.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset')
  if (status === '429' || (status === '503' && !UNLIMITED_PATHS.has(path))) names.push('Retry-After')
  if (status === '401') names.push('WWW-Authenticate')
  if (isManagementPath(path)) names.push('Cache-Control')
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]))
}

/** One example per error code of this status that this kind of route can answer. */
export function errorCodesFor(status: number, where: 'inbound' | 'management'): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => {
    const entry = ERROR_CODES[code]
    return entry.status === status && (entry.where === 'any' || entry.where === where)
  })
}

function errorExamples(status: string, where: 'inbound' | 'management'): Record<string, unknown> | undefined {
  const numeric = Number(status)
  if (numeric < 400) return undefined
  const codes = errorCodesFor(numeric, where)
  if (codes.length === 0) return undefined
  return Object.fromEntries(
    codes.map((code) => {
      const value: Json = {
        error: code,
        message: ERROR_CODES[code].example,
        request_id: '01970c6e-5b2a-7cc1-8f3e-6d1c2b3a4f50',
      }
      if (code === 'validation_failed')
        value.details = [{ path: '/limit', message: 'must be an integer from 1 to 200' }]
      if (code === 'rate_limited') Object.assign(value, { limit: 60, remaining: 0, retry_after: 60 })
      if (code === 'payload_too_large') value.limit_bytes = 102_400
      return [code, { summary: code, value }]
    }),
  )
}

/**
 * Walks every schema below the paths: collapses Elysia's integer coercion unions, drops the 3.0
 * keyword `nullable`, and replaces titled schemas by references to `components.schemas`.
 */
function rewriteSchemas(node: unknown, named: Record<string, Json>): unknown {
  if (Array.isArray(node)) return node.map((child) => rewriteSchemas(child, named))
  if (!node || typeof node !== 'object') return node
  let object = collapseCoercion(node as Json)
  if ('nullable' in object) {
    const { nullable: _nullable, ...rest } = object
    object = rest
  }
  const rewritten: Json = {}
  for (const [key, value] of Object.entries(object)) {
    // Examples are data, not schemas: a `title` field in an example stays where it is.
    rewritten[key] =
      key === 'examples' || key === 'example' || key === 'default' ? value : rewriteSchemas(value, named)
  }
  const title = rewritten.title
  if (typeof title === 'string' && isSchema(rewritten)) {
    const existing = named[title]
    if (existing && JSON.stringify(existing) !== JSON.stringify(rewritten)) {
      throw new Error(`two different schemas are titled "${title}": give one of them another title`)
    }
    named[title] = rewritten
    return { $ref: `#/components/schemas/${title}` }
  }
  return rewritten
}

function isSchema(object: Json): boolean {
  return 'type' in object || 'anyOf' in object || 'oneOf' in object || 'properties' in object
}

/** `anyOf: [{ type: string, format: integer|numeric }, { type: integer|number, … }]` → the number. */
function collapseCoercion(object: Json): Json {
  const members = object.anyOf
  if (!Array.isArray(members) || members.length !== 2) return object
  const [text, number] = members as Json[]
  const isCoercion =
    text?.type === 'string' &&
    (text.format === 'integer' || text.format === 'numeric') &&
    (number?.type === 'integer' || number?.type === 'number')
  if (!isCoercion) return object
  const { anyOf: _anyOf, ...outer } = object
  return { ...outer, ...number }
}
