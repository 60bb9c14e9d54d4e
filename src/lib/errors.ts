/**
 * The one error hierarchy. Anything thrown as an AppError is rendered by the errors plugin as
 * `{ error, message, request_id, ...extra }` with its status; anything else is a 500 (or a 503 when
 * the database is unreachable) and is logged.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'AppError'
  }
}

export interface ValidationDetail {
  path: string
  message: string
}

export const errors = {
  validation: (message: string, details: ValidationDetail[] = []) =>
    new AppError(400, 'validation_failed', message, { details }),
  invalidBody: (message: string, details: ValidationDetail[] = []) =>
    new AppError(400, 'invalid_body', message, { details }),
  unauthorized: (message: string, tokenWasSent: boolean) =>
    new AppError(
      401,
      tokenWasSent ? 'invalid_token' : 'unauthorized',
      message,
      {},
      {
        'www-authenticate': tokenWasSent ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"',
      },
    ),
  forbidden: (code: string, message: string, extra: Record<string, unknown> = {}) =>
    new AppError(403, code, message, extra),
  notFound: (what = 'resource', code = 'not_found') => new AppError(404, code, `${what} not found`),
  conflict: (code: string, message: string) => new AppError(409, code, message),
  payloadTooLarge: (limitBytes: number) =>
    new AppError(413, 'payload_too_large', `request body is larger than ${limitBytes} bytes`, {
      limit_bytes: limitBytes,
    }),
  unsupportedMediaType: (message: string) => new AppError(415, 'unsupported_media_type', message),
  unprocessable: (code: string, message: string, extra: Record<string, unknown> = {}) =>
    new AppError(422, code, message, extra),
  serviceUnavailable: (message = 'the service is temporarily unavailable, retry shortly', retryAfter = 5) =>
    new AppError(503, 'service_unavailable', message, {}, { 'retry-after': String(retryAfter) }),
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
])

/** What may be logged about a failed database call, and whether the server cannot serve now. */
export interface DatabaseErrorDescription {
  /** SQLSTATE (`53300`) or the driver's connection code (`ECONNREFUSED`, `CONNECT_TIMEOUT`). */
  sqlstate?: string
  message: string
  /** The statement text with its placeholders (`$1`), never the values. */
  statement?: string
  /**
   * The server cannot serve now (too many connections 53300, admin shutdown 57P01, starting up
   * 57P03, connection exceptions 08xxx, connection refused or timed out): 503 + Retry-After, not
   * 500.
   */
  unavailable: boolean
}

const MAX_STATEMENT_CHARS = 500

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
    if (!isDrizzleWrapper && code && (/^[0-9A-Z]{5}$/.test(code) || CONNECTION_ERROR_CODES.has(code))) {
      const message = typeof candidate.message === 'string' ? candidate.message : String(code)
      found = {
        sqlstate: code,
        // Data exceptions (class 22) quote the offending value ("invalid input syntax for type
        // integer: "…""): only the text before it is kept.
        message: code.startsWith('22') ? message.split(':')[0]! : message,
        unavailable:
          CONNECTION_ERROR_CODES.has(code) ||
          code === '53300' ||
          code.startsWith('08') ||
          /^57P0[123]$/.test(code),
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
