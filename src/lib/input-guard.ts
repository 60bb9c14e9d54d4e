import { AppError, errors, type ValidationDetail } from './errors'

/**
 * Input limits every route shares (docs/security.md, "Input limits"). Checked while the request is
 * parsed, before any handler, schema or recursive work sees the value: one mechanism for every
 * route instead of a rule per field.
 */

/** Arrays and objects nested deeper than this are refused: no route needs more than a few levels. */
export const MAX_JSON_DEPTH = 32
/** Any request body (the inbound route keeps its own, smaller limit of 102,400 bytes). */
export const MAX_REQUEST_BODY_BYTES = 1024 * 1024
/** A refusal names at most this many fields. */
const MAX_DETAILS = 20

const STRING_RULE = 'must not contain NUL (\\u0000) or unpaired surrogate (\\ud800-\\udfff) characters'
const KEY_RULE =
  'field names must not contain NUL (\\u0000) or unpaired surrogate (\\ud800-\\udfff) characters'

/** `0000-…`: ISO 8601 allows year zero, PostgreSQL's timestamp input refuses it. */
const YEAR_ZERO_TIMESTAMP = /^[+-]?0{4,6}-\d{2}-\d{2}/

export class PayloadTooLargeError extends AppError {
  /** `receivedBytes`: the declared length, or what had arrived when reading stopped. */
  constructor(
    limitBytes: number,
    readonly receivedBytes: number,
  ) {
    super('payload_too_large', `the request body is larger than ${limitBytes} bytes`, {
      limit_bytes: limitBytes,
    })
  }
}

/**
 * 413 before reading when Content-Length says the body is too large. Bun frames a body with a
 * Content-Length to exactly that many bytes, so only bodies without one need counting.
 */
export function checkDeclaredLength(request: Request, limitBytes: number): void {
  const declared = request.headers.get('content-length')
  if (declared === null) return
  const length = Number(declared)
  if (!Number.isFinite(length) || length < 0) throw errors.invalidBody('invalid Content-Length header')
  if (length > limitBytes) throw new PayloadTooLargeError(limitBytes, length)
}

/**
 * The body's bytes, never more than `limitBytes` of them: a declared length over the limit is
 * refused without reading, a chunked body is counted while it streams and reading stops at the
 * first byte over the limit. Every route's body is read here (the inbound route with its own limit).
 */
export async function readWithin(request: Request, limitBytes: number): Promise<Uint8Array> {
  checkDeclaredLength(request, limitBytes)
  if (!request.body) return new Uint8Array(0)
  if (request.headers.get('content-length') !== null) {
    // The prototype's reader: InputGuard.arm replaces the instance's own with one that calls this.
    return Request.prototype.bytes.call(request)
  }
  const reader = request.body.getReader()
  const chunks: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limitBytes) {
      await reader.cancel().catch(() => {})
      throw new PayloadTooLargeError(limitBytes, total)
    }
    chunks.push(value)
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
}

/** PostgreSQL stores neither NUL (text, jsonb) nor a lone UTF-16 surrogate (jsonb). */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed()
}

/** The quote at `index` is escaped: an odd number of backslashes precedes it. */
function escapedAt(text: string, index: number): boolean {
  let backslashes = 0
  while (text.charCodeAt(index - 1 - backslashes) === 92) backslashes++
  return backslashes % 2 === 1
}

/** A cheap first look before the year-zero pattern: `0`, `+0` or `-0` at the start. */
function startsLikeYearZero(text: string): boolean {
  const first = text.charCodeAt(0)
  return first === 48 || ((first === 43 || first === 45) && text.charCodeAt(1) === 48)
}

function pointer(parent: string, key: string | number): string {
  const text = String(key)
  const safe = isStorableText(text) ? text : text.replaceAll('\u0000', '\uFFFD').toWellFormed()
  return `${parent}/${safe.replaceAll('~', '~0').replaceAll('/', '~1')}`
}

/**
 * The guard itself. An object per app context (not module functions) so a benchmark can measure
 * the pipeline with and without it in one process, as it already replaces the lead write.
 */
export class InputGuard {
  /**
   * Index of the first `[` or `{` (outside strings) that opens level `limit + 1`, or -1. One linear
   * pass without allocation: a 100 KB body of 40,000 brackets costs well under a millisecond, where
   * JSON.parse and every walk after it would recurse 40,000 levels. Strings, most of a lead's text,
   * are skipped with indexOf (native) to their closing quote instead of character by character.
   */
  depthViolation(text: string, limit = MAX_JSON_DEPTH): number {
    // Level limit + 1 takes at least limit + 1 opening brackets.
    if (text.length <= limit) return -1
    let depth = 0
    for (let index = 0; index < text.length; index++) {
      const code = text.charCodeAt(index)
      if (code === 34) {
        let end = text.indexOf('"', index + 1)
        while (end !== -1 && escapedAt(text, end)) end = text.indexOf('"', end + 1)
        // An unterminated string: nothing after it is structure, and JSON.parse refuses the text.
        if (end === -1) return -1
        index = end
      } else if (code === 123 || code === 91) {
        if (++depth > limit) return index
      } else if (code === 125 || code === 93) depth--
    }
    return -1
  }

  /** 400 `invalid_body` when the JSON text nests deeper than MAX_JSON_DEPTH. */
  checkJsonDepth(text: string): void {
    const at = this.depthViolation(text)
    if (at === -1) return
    throw errors.invalidBody(`JSON nested deeper than ${MAX_JSON_DEPTH} levels is not accepted`, [
      { path: '/', message: `nesting exceeds ${MAX_JSON_DEPTH} levels at character ${at}` },
    ])
  }

  /** JSON text → value: depth first (no recursion on hostile input), then JSON.parse. */
  parseJson(text: string): unknown {
    this.checkJsonDepth(text)
    try {
      return JSON.parse(text)
    } catch (error) {
      throw errors.invalidBody('the request body is not valid JSON', [
        { path: '/', message: (error as Error).message },
      ])
    }
  }

  /**
   * Every string and every key in `value` that PostgreSQL could not store, as validation details
   * under `root`. Iterative, so even a value built in process (not parsed) cannot overflow the stack.
   */
  unstorable(value: unknown, root = ''): ValidationDetail[] {
    const details: ValidationDetail[] = []
    const stack: Array<[unknown, string]> = [[value, root]]
    while (stack.length > 0 && details.length < MAX_DETAILS) {
      const [current, path] = stack.pop()!
      if (typeof current === 'string') {
        if (!isStorableText(current)) details.push({ path: path || '/', message: STRING_RULE })
      } else if (Array.isArray(current)) {
        for (let index = current.length - 1; index >= 0; index--) {
          stack.push([current[index], pointer(path, index)])
        }
      } else if (typeof current === 'object' && current !== null && !ArrayBuffer.isView(current)) {
        if (current instanceof ArrayBuffer || current instanceof Blob) continue
        for (const key of Object.keys(current).reverse()) {
          if (!isStorableText(key)) {
            details.push({ path: pointer(path, key), message: KEY_RULE })
            continue
          }
          stack.push([(current as Record<string, unknown>)[key], pointer(path, key)])
        }
      }
    }
    return details
  }

  /**
   * Query and path parameters are filters: besides the string rule, a timestamp with year 0000
   * (valid ISO 8601, refused by PostgreSQL) is named here rather than failing the query.
   */
  unstorableParameters(parameters: Record<string, unknown> | undefined, where: string): ValidationDetail[] {
    if (!parameters) return []
    const details: ValidationDetail[] = []
    // Every request passes here: the pointer is built only for a refusal.
    for (const name in parameters) {
      if (!Object.hasOwn(parameters, name)) continue
      if (!isStorableText(name)) {
        details.push({
          path: pointer('', name),
          message: `${where} names ${KEY_RULE.slice('field names '.length)}`,
        })
        continue
      }
      const value = parameters[name]
      for (const item of Array.isArray(value) ? value : [value]) {
        if (typeof item !== 'string') continue
        if (!isStorableText(item))
          details.push({ path: pointer('', name), message: `${where} ${name} ${STRING_RULE}` })
        else if (startsLikeYearZero(item) && YEAR_ZERO_TIMESTAMP.test(item)) {
          details.push({
            path: pointer('', name),
            message: `${where} ${name}: year 0000 is outside the supported range 0001-9999`,
          })
        }
      }
    }
    return details
  }

  /** The parse-stage check of a whole request: throws 400 `validation_failed` naming each field. */
  checkRequest(parts: { body?: unknown; query?: Record<string, unknown>; params?: Record<string, unknown> }) {
    const details = [
      ...this.unstorableParameters(parts.params, 'path parameter'),
      ...this.unstorableParameters(parts.query, 'query parameter'),
      ...(parts.body === undefined ? [] : this.unstorable(parts.body)),
    ]
    if (details.length > 0) {
      throw errors.validation(
        'the request contains values that cannot be stored',
        details.slice(0, MAX_DETAILS),
      )
    }
  }

  /** 413 before reading when Content-Length says the body is over MAX_REQUEST_BODY_BYTES. */
  checkDeclaredLength(request: Request): void {
    checkDeclaredLength(request, MAX_REQUEST_BODY_BYTES)
  }

  /** The body's bytes, at most MAX_REQUEST_BODY_BYTES of them. */
  readBody(request: Request): Promise<Uint8Array> {
    return readWithin(request, MAX_REQUEST_BODY_BYTES)
  }

  /** Body-reading refusals of each request, kept so that optional-body routes refuse them too. */
  private readonly refusals = new WeakMap<Request, AppError>()

  /**
   * Makes the request's own body readers (`json`, `text`, `arrayBuffer`, `formData`: what Elysia's
   * body parsers call) read within the size limit and parse JSON depth-first. Done on the request
   * rather than as a parse hook: Elysia swallows a parse error where the body is optional, and
   * @elysiajs/openapi documents no media type for a route whose parser is a function.
   */
  arm(request: Request): void {
    const read = async () => {
      try {
        return await this.readBody(request)
      } catch (error) {
        if (error instanceof AppError) this.refusals.set(request, error)
        throw error
      }
    }
    const decode = async () => new TextDecoder().decode(await read())
    Object.defineProperties(request, {
      json: {
        value: async () => {
          const text = await decode()
          // No body: undefined, so an optional body is absent and a required one fails its schema.
          if (text.trim() === '') return undefined
          try {
            return this.parseJson(text)
          } catch (error) {
            if (error instanceof AppError) this.refusals.set(request, error)
            throw error
          }
        },
      },
      text: { value: decode },
      arrayBuffer: { value: async () => (await read()).slice().buffer },
      formData: {
        value: async () => {
          const bytes = (await read()) as Uint8Array<ArrayBuffer>
          const type = request.headers.get('content-type') ?? ''
          return new Response(bytes, { headers: { 'content-type': type } }).formData()
        },
      },
    })
  }

  /** A refusal met while the body was read, even where Elysia went on without the body. */
  refusalOf(request: Request): AppError | undefined {
    return this.refusals.get(request)
  }
}
