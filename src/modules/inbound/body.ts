import { errors } from '../../lib/errors'
import { PayloadTooLargeError } from '../../lib/input-guard'

/** Spec §4.1 / §8: an inbound body may be at most 100 KB. */
export const MAX_BODY_BYTES = 102_400
/** Delivery logs keep at most this much of a body. */
export const LOGGED_BODY_BYTES = 8 * 1024

export class BodyTooLargeError extends PayloadTooLargeError {
  constructor(readonly receivedBytes: number) {
    super(MAX_BODY_BYTES)
  }
}

/**
 * Reads at most MAX_BODY_BYTES. A declared Content-Length over the limit is refused without
 * reading; a body without one (chunked) is counted while it streams and reading stops at the first
 * byte over the limit, so no more than the limit is ever buffered.
 */
export async function readLimitedBody(request: Request): Promise<{ text: string; bytes: number }> {
  const declared = request.headers.get('content-length')
  if (declared !== null) {
    const length = Number(declared)
    if (!Number.isFinite(length) || length < 0) throw errors.invalidBody('invalid Content-Length header')
    if (length > MAX_BODY_BYTES) throw new BodyTooLargeError(length)
  }
  if (!request.body) return { text: '', bytes: 0 }
  let bytes: Uint8Array
  if (declared !== null) {
    // The HTTP framing bounds the body to the declared length, already checked above.
    bytes = new Uint8Array(await request.arrayBuffer())
    if (bytes.byteLength > MAX_BODY_BYTES) throw new BodyTooLargeError(bytes.byteLength)
  } else {
    const reader = request.body.getReader()
    const chunks: Uint8Array[] = []
    let total = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > MAX_BODY_BYTES) {
        await reader.cancel().catch(() => {})
        throw new BodyTooLargeError(total)
      }
      chunks.push(value)
    }
    bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
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
