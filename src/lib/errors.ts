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

/**
 * True when an error means "the database cannot be reached right now" rather than "this query is
 * wrong": connection failures and PostgreSQL's connection-exception / shutdown classes. Those are
 * answered with 503 + Retry-After, never 500.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current: unknown = error, depth = 0; current && depth < 5; depth++) {
    const candidate = current as { code?: unknown; errno?: unknown; cause?: unknown; message?: unknown }
    const code = typeof candidate.code === 'string' ? candidate.code : undefined
    if (code && (CONNECTION_ERROR_CODES.has(code) || code.startsWith('08') || /^57P0[123]$/.test(code))) {
      return true
    }
    if (
      typeof candidate.message === 'string' &&
      /connect(ion)? (refused|terminated|closed|timeout)/i.test(candidate.message)
    ) {
      return true
    }
    current = candidate.cause
  }
  return false
}
