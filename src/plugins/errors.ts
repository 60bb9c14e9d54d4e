import { Elysia } from 'elysia'
import type { AppContext } from '../context'
import {
  AppError,
  DEADLOCK_DETECTED,
  describeDatabaseError,
  describeError,
  errors,
  LOCK_NOT_AVAILABLE,
  QUERY_CANCELED,
  READ_ONLY_TRANSACTION,
  SERIALIZATION_FAILURE,
} from '../lib/errors'
import { type RequestRegistry, requestPath } from '../lib/http'
import { describeValidationIssues, type ValidationIssue } from '../lib/validation-messages'

interface ValidationLike {
  all?: ValidationIssue[]
}

/**
 * A page for an error on a browser route (the dashboard), or null to answer the JSON body. Passed
 * in by createApp so this plugin knows nothing of the dashboard's views.
 */
export type ErrorPageRenderer = (request: Request, status: number, message: string) => string | null

/**
 * One onError for the whole app: renders DESIGN §2 bodies `{ error, message, request_id, ... }`,
 * adds the request-id header and the
 * headers already set for the response (rate limit, CORS), logs only 5xx. Database outages become 503 with
 * Retry-After instead of 500. On the dashboard's routes the same error is an HTML page instead.
 */
export function errorsPlugin(
  ctx: AppContext,
  registry: RequestRegistry,
  options: { errorPage?: ErrorPageRenderer; routes?: RouteShapes } = {},
) {
  return new Elysia({ name: 'errors' }).onError({ as: 'global' }, ({ code, error, request, set }) => {
    const response = errorResponse(ctx, registry, {
      error,
      code,
      request,
      headers: set.headers,
      errorPage: options.errorPage,
      routes: options.routes,
    })
    set.status = response.status
    return response
  })
}

/** nginx's status for a request whose client closed the connection before the answer. */
export const CLIENT_CLOSED_REQUEST = 499

/**
 * Whether an error is what reading a request's body throws once its client has gone: Bun's
 * AbortError ("The connection was closed."), or Elysia's PARSE error wrapping the failed read.
 * Only consulted when the request's signal says the client has gone.
 */
function isClientGone(error: unknown, code: string | number | undefined): boolean {
  if (code === 'PARSE') return true
  for (let current: unknown = error, depth = 0; current && depth < 4; depth++) {
    if (current instanceof Error && current.name === 'AbortError') return true
    current = (current as { cause?: unknown }).cause
  }
  return false
}

/** `headers`, and those set for the response so far (rate limit, CORS) that it does not set itself. */
function withHeadersSoFar(headers: Record<string, string>, headersSoFar: Record<string, unknown>) {
  for (const [name, value] of Object.entries(headersSoFar)) {
    if (typeof value === 'string' && !(name in headers)) headers[name] = value
  }
  return headers
}

/** The routes' shapes, for the Allow header of a 405 (src/lib/route-templates.ts). */
export interface RouteShapes {
  allowOf(path: string): string | null
}

/**
 * Database refusals that leave the replica ready (503, but no mark on /readyz): the database is up
 * and so is the replica, and taking every replica out of the load balancer would also stop what
 * still works. A lock held elsewhere (a migration, an operator) past DATABASE_LOCK_TIMEOUT_MS; a
 * server that takes no writes (a standby, a failover's old primary come back as one), whose reads
 * still work and which an operator must look at; a transaction rolled back for another's sake (a
 * serialization failure, or a deadlock: a lock-order defect worth a report, so an error line),
 * which the same request sent again gets past; a statement cancelled by `statement_timeout` (a
 * role's or DATABASE_URL's `options`) or by an operator.
 */
const DATABASE_UP_REFUSALS: Record<string, { level: 'warn' | 'error'; message: string }> = {
  [LOCK_NOT_AVAILABLE]: { level: 'warn', message: 'database lock wait timed out' },
  [READ_ONLY_TRANSACTION]: { level: 'error', message: 'database takes no writes (read-only)' },
  [SERIALIZATION_FAILURE]: {
    level: 'warn',
    message: 'transaction rolled back for a concurrent one (serialization failure)',
  },
  [DEADLOCK_DETECTED]: { level: 'error', message: 'transaction rolled back: deadlock with another one' },
  [QUERY_CANCELED]: {
    level: 'warn',
    message: 'database statement cancelled (statement_timeout or an operator)',
  },
}

/**
 * The answer to an error: the plugin's, and the webhook POST's, which is served before Elysia's
 * lifecycle (src/modules/inbound/direct-post.ts) and so never reaches onError. `code` is Elysia's
 * (`VALIDATION`, `PARSE`, `NOT_FOUND`, …) when Elysia raised the error; `headers` are those already
 * set for the response (rate limit, CORS), kept unless the error sets its own.
 */
export function errorResponse(
  ctx: AppContext,
  registry: RequestRegistry,
  {
    error,
    code,
    request,
    headers: headersSoFar,
    errorPage,
    routes,
  }: {
    error: unknown
    code?: string | number
    request: Request
    headers: Record<string, unknown>
    errorPage?: ErrorPageRenderer
    /** The app's routes by shape: a path that has routes, asked with another method, is a 405. */
    routes?: RouteShapes
  },
): Response {
  const meta = registry.get(request)
  // The client closed the connection before the answer (a tab closed, a phone that lost its
  // network, a sender's own timeout): nobody reads it, and a body read that failed for it is not the
  // server's error. 499 in the access line (nginx's "client closed request"), no error line: before,
  // an alert on error lines or on the 5xx rate paged for every such client
  // (test/integration/client-disconnect.test.ts). A server-side failure meanwhile is still logged.
  const clientGone = () =>
    new Response(null, { status: CLIENT_CLOSED_REQUEST, headers: { 'x-request-id': meta.requestId } })
  if (request.signal.aborted && isClientGone(error, code)) return clientGone()
  let appError: AppError
  const cause = (error as { cause?: unknown }).cause
  const databaseError = error instanceof AppError ? null : describeDatabaseError(error)
  if (error instanceof AppError) appError = error
  // Elysia wraps whatever a parse hook throws in a ParseError: the input guard's refusals.
  else if (code === 'PARSE' && cause instanceof AppError) appError = cause
  else if (code === 'VALIDATION') {
    const issues = (error as unknown as ValidationLike).all
    const details = describeValidationIssues(Array.isArray(issues) ? issues : [], request)
    appError = errors.validation('the request does not match the schema', details)
  } else if (isValidationMessageFailure(error)) {
    appError = errors.validation('the request does not match the schema')
  } else if (code === 'NOT_FOUND') {
    // A path the app serves, with a method it does not (RFC 9110): 405 and what it allows, or for
    // OPTIONS the same list as the answer.
    const allow = routes?.allowOf(requestPath(request)) ?? null
    if (allow !== null && request.method === 'OPTIONS') {
      return new Response(null, {
        status: 204,
        headers: withHeadersSoFar({ allow, 'x-request-id': meta.requestId }, headersSoFar),
      })
    }
    appError = allow === null ? errors.notFound('route') : errors.methodNotAllowed(request.method, allow)
  } else if (code === 'PARSE') appError = errors.invalidBody('the request body could not be parsed')
  else if (code === 'INVALID_COOKIE_SIGNATURE') appError = errors.validation('invalid cookie')
  else if (databaseError?.sqlstate && Object.hasOwn(DATABASE_UP_REFUSALS, databaseError.sqlstate)) {
    const { level, message } = DATABASE_UP_REFUSALS[databaseError.sqlstate]!
    ctx.logger[level](message, { request_id: meta.requestId, error: describeError(error) })
    appError = errors.serviceUnavailable()
  } else if (databaseError?.unavailable) {
    // /readyz reports the replica not ready while this keeps happening (see the health module).
    ctx.lifecycle.databaseUnavailableAt = performance.now()
    ctx.logger.error('database unavailable', { request_id: meta.requestId, error: describeError(error) })
    appError = errors.serviceUnavailable()
  } else {
    ctx.logger.error('unhandled error', { request_id: meta.requestId, error: describeError(error) })
    appError = new AppError('internal_error', 'an unexpected error occurred')
  }
  if (appError.status >= 500 && appError.status !== 503) {
    ctx.logger.error('server error', { request_id: meta.requestId, code: appError.code })
  }
  // e.g. a route whose framework let a failed body read pass as no body, and then refused it
  if (request.signal.aborted) return clientGone()
  const headers = withHeadersSoFar(
    { 'content-type': 'application/json', 'x-request-id': meta.requestId, ...appError.headers },
    headersSoFar,
  )
  const page = errorPage?.(request, appError.status, appError.message)
  if (page !== null && page !== undefined) {
    return new Response(page, {
      status: appError.status,
      headers: { ...headers, 'content-type': 'text/html; charset=utf-8' },
    })
  }
  return new Response(
    JSON.stringify({
      error: appError.code,
      message: appError.message,
      request_id: meta.requestId,
      ...appError.extra,
    }),
    { status: appError.status, headers },
  )
}

/**
 * Elysia builds a validation error's summary with `${value}`; a body value that is an object with
 * an own, non-callable `toString` (`{"name": {"toString": "x"}}`) makes that throw a TypeError
 * ("No default value") instead of the ValidationError. The request was invalid all the same: 400.
 */
function isValidationMessageFailure(error: unknown): boolean {
  return (
    error instanceof TypeError &&
    typeof error.stack === 'string' &&
    /\b(mapValueError|ValidationError)\b/.test(error.stack) &&
    /elysia[\\/]dist[\\/]error/.test(error.stack)
  )
}
