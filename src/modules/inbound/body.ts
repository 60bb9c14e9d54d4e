import { AppError, errors } from '../../lib/errors'
import { declaredBodyLength, readStreamWithin } from '../../lib/input-guard'

/** Spec §4.1 / §8: an inbound body may be at most 100 KB. */
export const MAX_BODY_BYTES = 102_400
/** Delivery logs keep at most this much of a body. */
export const LOGGED_BODY_BYTES = 8 * 1024

export class BodyTooLargeError extends AppError {
  constructor(readonly receivedBytes: number) {
    super(413, 'payload_too_large', `the request body is larger than ${MAX_BODY_BYTES} bytes`, {
      limit_bytes: MAX_BODY_BYTES,
    })
  }
}

/**
 * Reads at most MAX_BODY_BYTES. A declared Content-Length over the limit is refused without
 * reading; a body without one (chunked) is counted while it streams and reading stops at the first
 * byte over the limit, so no more than the limit is ever buffered.
 */
export async function readLimitedBody(request: Request): Promise<{ text: string; bytes: number }> {
  const declared = declaredBodyLength(request)
  if (declared !== null && declared > MAX_BODY_BYTES) throw new BodyTooLargeError(declared)
  if (!request.body) return { text: '', bytes: 0 }
  let bytes: Uint8Array
  if (declared !== null) {
    // The HTTP framing bounds the body to the declared length, already checked above.
    bytes = new Uint8Array(await request.arrayBuffer())
    if (bytes.byteLength > MAX_BODY_BYTES) throw new BodyTooLargeError(bytes.byteLength)
  } else {
    bytes = await readStreamWithin(
      request.body,
      MAX_BODY_BYTES,
      (bytesSeen) => new BodyTooLargeError(bytesSeen),
    )
  }
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes), bytes: bytes.byteLength }
  } catch {
    throw errors.invalidBody('the request body is not valid UTF-8')
  }
}

/** The body as a delivery log keeps it: cut at LOGGED_BODY_BYTES. */
export function bodyForLog(raw: string): { body: string; truncated: boolean } {
  // A NUL byte is valid UTF-8 but PostgreSQL text cannot hold it: the log shows U+FFFD instead.
  const text = raw.includes('\u0000') ? raw.replaceAll('\u0000', '\uFFFD') : raw
  if (text.length <= LOGGED_BODY_BYTES / 4 || Buffer.byteLength(text) <= LOGGED_BODY_BYTES) {
    return { body: text, truncated: false }
  }
  // Cutting bytes may split a character; the decoder drops the partial one.
  const cut = Buffer.from(text)
    .subarray(0, LOGGED_BODY_BYTES)
    .toString('utf8')
    .replace(/\uFFFD$/, '')
  return { body: cut, truncated: true }
}

export function isJsonContentType(value: string | null): boolean {
  if (!value) return false
  const type = value.split(';')[0]!.trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}
