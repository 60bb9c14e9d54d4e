/**
 * The closed set of error codes, each with its one HTTP status (unkey's `codeToStatus`), where it can
 * be met and an example message. The errors plugin renders them; the OpenAPI document's per-status
 * error examples come from this table too (src/lib/openapi-document.ts), so a code cannot be
 * published under a status it is never sent with. `where`: `inbound` codes are only answered by the
 * webhook URL, `management` codes only by the management API, `any` by both.
 */
export const ERROR_CODES = {
  validation_failed: { status: 400, where: 'any', example: 'the request does not match the schema' },
  invalid_body: { status: 400, where: 'any', example: 'the request body could not be parsed' },
  invalid_json: { status: 400, where: 'inbound', example: 'the body is not valid JSON' },
  invalid_content_type: {
    status: 400,
    where: 'inbound',
    example: 'the body must be JSON sent with "Content-Type: application/json"',
  },
  unauthorized: { status: 401, where: 'management', example: 'authentication required' },
  invalid_token: { status: 401, where: 'management', example: 'the token is not valid' },
  invalid_credentials: {
    status: 401,
    where: 'management',
    example: 'the e-mail address or the password is wrong',
  },
  signup_disabled: { status: 403, where: 'management', example: 'sign-up is disabled on this service' },
  session_required: {
    status: 403,
    where: 'management',
    example: 'this operation needs a session token, not a personal access token',
  },
  permission_denied: {
    status: 403,
    where: 'management',
    example: 'the permission "settings.integrations" is required',
  },
  plan_feature_required: {
    status: 403,
    where: 'management',
    example: 'the plan "free" does not include the feature "integrations"',
  },
  role_above_own: { status: 403, where: 'management', example: 'the role "owner" is above your own' },
  ip_not_allowed: {
    status: 403,
    where: 'inbound',
    example: "requests from 203.0.113.7 are not in this source's IP allow list",
  },
  domain_not_allowed: {
    status: 403,
    where: 'inbound',
    example: "requests from evil.example are not in this source's domain allow list",
  },
  not_found: { status: 404, where: 'management', example: 'source not found' },
  source_not_found: { status: 404, where: 'management', example: 'source not found' },
  log_not_found: { status: 404, where: 'management', example: 'delivery-log entry not found' },
  webhook_not_found: { status: 404, where: 'inbound', example: 'unknown webhook URL' },
  method_not_allowed: {
    status: 405,
    where: 'any',
    example: 'PUT is not allowed here; allowed: DELETE, GET, HEAD, OPTIONS, PATCH',
  },
  email_taken: {
    status: 409,
    where: 'management',
    example: 'a user with this e-mail address already exists',
  },
  duplicate_lead: {
    status: 409,
    where: 'management',
    example: 'another lead of this organization already has this e-mail address',
  },
  last_owner: { status: 409, where: 'management', example: 'the organization must keep at least one owner' },
  endpoint_limit_reached: {
    status: 409,
    where: 'management',
    example: 'an organization has at most 50 webhook endpoints',
  },
  endpoint_disabled: { status: 409, where: 'management', example: 'enable the endpoint before testing it' },
  payload_too_large: { status: 413, where: 'any', example: 'the request body is larger than 102400 bytes' },
  unsupported_media_type: {
    status: 415,
    where: 'management',
    example: 'the body must be JSON sent with Content-Type: application/json (got "text/plain")',
  },
  unknown_scope: { status: 422, where: 'management', example: 'unrecognised scope: leads.fly' },
  rate_limited: {
    status: 429,
    where: 'any',
    example: 'rate limit exceeded: at most 60 requests per minute; retry in 60 s',
  },
  internal_error: { status: 500, where: 'any', example: 'an unexpected error occurred' },
  service_unavailable: {
    status: 503,
    where: 'any',
    example: 'the service is temporarily unavailable, retry shortly',
  },
} as const satisfies Record<
  string,
  { status: number; where: 'inbound' | 'management' | 'any'; example: string }
>

export type ErrorCode = keyof typeof ERROR_CODES

export function codeToStatus(code: ErrorCode): number {
  return ERROR_CODES[code].status
}

/**
 * The one error hierarchy. Anything thrown as an AppError is rendered by the errors plugin as
 * `{ error, message, request_id, ...extra }` with the status of its code; anything else is a 500
 * (or a 503 when the database is unreachable) and is logged.
 */
export class AppError extends Error {
  readonly status: number

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'AppError'
    this.status = codeToStatus(code)
  }
}

export interface ValidationDetail {
  path: string
  message: string
}

/** Refusals whose body or headers follow a rule of their own; every other one is `new AppError(code, …)`. */
export const errors = {
  validation: (message: string, details: ValidationDetail[] = []) =>
    new AppError('validation_failed', message, { details }),
  invalidBody: (message: string, details: ValidationDetail[] = []) =>
    new AppError('invalid_body', message, { details }),
  unauthorized: (message: string, tokenWasSent: boolean) =>
    new AppError(
      tokenWasSent ? 'invalid_token' : 'unauthorized',
      message,
      {},
      {
        'www-authenticate': tokenWasSent ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"',
      },
    ),
  notFound: (what: string) => new AppError('not_found', `${what} not found`),
  /** `allow`: the methods the path serves, as the Allow header lists them. */
  methodNotAllowed: (method: string, allow: string) =>
    new AppError('method_not_allowed', `${method} is not allowed here; allowed: ${allow}`, {}, { allow }),
  serviceUnavailable: (message = 'the service is temporarily unavailable, retry shortly', retryAfter = 5) =>
    new AppError('service_unavailable', message, {}, { 'retry-after': String(retryAfter) }),
}

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  // the group commit's own bound on an answer (INGEST_ANSWER_TIMEOUT_MS, DatabaseAnswerTimeoutError)
  'ANSWER_TIMEOUT',
])

/**
 * A TLS handshake the client refused (Node's and Bun's codes: a certificate not signed by the
 * authority of DATABASE_URL's sslrootcert, a name it does not hold, an expired one): the server
 * cannot be reached as the URL asks, which the log must say in those words. Before, the description
 * was "database query failed", and a replica stopped at start gave no reason.
 */
const TLS_FAILURE_CODE =
  /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED|SELF_SIGNED_CERT|HOSTNAME_MISMATCH)/

/** What may be logged about a failed database call, and whether the server cannot serve now. */
export interface DatabaseErrorDescription {
  /** SQLSTATE (`53300`) or the driver's connection code (`ECONNREFUSED`, `CONNECT_TIMEOUT`). */
  sqlstate?: string
  message: string
  /** The statement text with its placeholders (`$1`), never the values. */
  statement?: string
  /**
   * The server cannot serve now, and the same request may succeed later (serverCannotServeNow):
   * 503 + Retry-After, not 500.
   */
  unavailable: boolean
}

const MAX_STATEMENT_CHARS = 500

/**
 * SQLSTATE read_only_sql_transaction: the server takes no writes (a standby, a failover in progress
 * whose old primary came back as one, a host name that still points at it). The database answers:
 * the request is answered 503, the replica stays ready (its reads still work).
 */
export const READ_ONLY_TRANSACTION = '25006'

/**
 * SQLSTATEs of a transaction the server rolled back because of another one: a serialization failure
 * (40001) or a deadlock (40P01). Nothing of it was written, and the same request sent again succeeds
 * once the other transaction is done: PostgreSQL's documentation asks clients to retry them.
 */
export const SERIALIZATION_FAILURE = '40001'
export const DEADLOCK_DETECTED = '40P01'
const TRANSACTION_CONFLICTS = new Set([SERIALIZATION_FAILURE, DEADLOCK_DETECTED])

/** SQLSTATE query_canceled: `statement_timeout` (a role's or DATABASE_URL's `options`) or an operator's cancel. */
export const QUERY_CANCELED = '57014'

/** Whether a SQLSTATE is a transaction rolled back for another one's sake (TRANSACTION_CONFLICTS). */
export function isTransactionConflict(code: string): boolean {
  return TRANSACTION_CONFLICTS.has(code)
}

/**
 * Whether a SQLSTATE (or a driver's connection code) means the server cannot serve now, where the
 * same request may succeed later: a connection exception (class 08), a lack of resources (class
 * 53: disk full, out of memory, too many connections, a configured limit), an operator's
 * intervention (class 57: a shutdown, a crash of another backend, starting up, an idle session
 * ended, a statement cancelled by `statement_timeout` or by hand), a lock held elsewhere past
 * DATABASE_LOCK_TIMEOUT_MS (55P03), a server that takes no writes (25006), the server's own system
 * or I/O error (class 58), a TLS handshake refused (a certificate the URL's authority did not sign,
 * or for another name), a deadlock or serialization failure (the transaction was rolled back for
 * another's sake: the group commit writes such a group's leads one by one first,
 * src/modules/inbound/group-commit.ts). Not 57P04 (the database dropped) nor class 40's 40002 (a
 * deferred constraint), which the same request meets again.
 */
export function serverCannotServeNow(code: string): boolean {
  return (
    CONNECTION_ERROR_CODES.has(code) ||
    TLS_FAILURE_CODE.test(code) ||
    code.startsWith('08') ||
    code.startsWith('53') ||
    code.startsWith('58') ||
    /^57P0[1235]$/.test(code) ||
    code === QUERY_CANCELED ||
    code === LOCK_NOT_AVAILABLE ||
    code === READ_ONLY_TRANSACTION ||
    isTransactionConflict(code)
  )
}

/**
 * SQLSTATE lock_not_available: a statement waited DATABASE_LOCK_TIMEOUT_MS for a lock another
 * session holds (src/db/client.ts connectionSettings) and its transaction rolled back. The database
 * is up: the request is answered 503, the replica stays ready.
 */
export const LOCK_NOT_AVAILABLE = '55P03'

/**
 * The one description of a database error: for the unhandled-error log, the start-up failure
 * message and the 503 classification. Drizzle wraps driver errors as `Failed query: <sql>\nparams:
 * <values>`: its message carries lead personal data and key digests, so it is never used; the
 * statement comes from its `query` and the SQLSTATE and message from its cause. postgres.js and
 * PGlite errors keep `parameters`/`params` too: not read either. `detail` (it can quote a value,
 * "Key (email)=(…) already exists") is left out for the same reason.
 * Returns null when nothing in the chain looks like a database error.
 */
export function describeDatabaseError(error: unknown): DatabaseErrorDescription | null {
  let statement: string | undefined
  let found: DatabaseErrorDescription | null = null
  for (let current: unknown = error, depth = 0; current && depth < 6; depth++) {
    if (typeof current !== 'object') break
    const candidate = current as {
      code?: unknown
      message?: unknown
      cause?: unknown
      query?: unknown
      name?: unknown
    }
    if (typeof candidate.query === 'string' && statement === undefined) {
      statement = candidate.query.slice(0, MAX_STATEMENT_CHARS)
    }
    const isDrizzleWrapper =
      typeof candidate.message === 'string' && candidate.message.startsWith('Failed query: ')
    const code = typeof candidate.code === 'string' ? candidate.code : undefined
    if (
      !isDrizzleWrapper &&
      code &&
      (/^[0-9A-Z]{5}$/.test(code) || CONNECTION_ERROR_CODES.has(code) || TLS_FAILURE_CODE.test(code))
    ) {
      const message = typeof candidate.message === 'string' ? candidate.message : String(code)
      found = {
        sqlstate: code,
        // Data exceptions (class 22) quote the offending value ("invalid input syntax for type
        // integer: "…""): only the text before it is kept.
        message: code.startsWith('22') ? message.split(':')[0]! : message,
        unavailable: serverCannotServeNow(code),
      }
      break
    }
    if (
      !isDrizzleWrapper &&
      typeof candidate.message === 'string' &&
      /connect(ion)? (refused|terminated|closed|timeout)/i.test(candidate.message)
    ) {
      found = { message: candidate.message, unavailable: true }
      break
    }
    current = candidate.cause
  }
  if (!found && statement === undefined) return null
  const description = found ?? { message: 'database query failed', unavailable: false }
  return statement === undefined ? description : { ...description, statement }
}

/**
 * True when an error means "the database cannot serve right now" rather than "this query is
 * wrong". Those are answered with 503 + Retry-After, never 500.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return describeDatabaseError(error)?.unavailable ?? false
}

/**
 * An error as it may be written to the log: a database error by its description (never parameter
 * values), anything else by name and message.
 */
export function describeError(error: unknown): Record<string, unknown> {
  const database = describeDatabaseError(error)
  if (database) {
    const { unavailable: _unavailable, ...fields } = database
    return fields
  }
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack }
  return { message: String(error) }
}
