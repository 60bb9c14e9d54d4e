import { errors } from '../../lib/errors'
import { readWithin } from '../../lib/input-guard'

/** Spec §4.1 / §8: an inbound body may be at most 100 KB. */
export const MAX_BODY_BYTES = 102_400
/** Delivery logs keep at most this much of a body. */
export const LOGGED_BODY_BYTES = 8 * 1024

// One decoder for every request: decode() without `stream` keeps no state between calls, and
// building a fatal decoder per request was a measurable share of the inbound path's CPU.
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true })

/** At most MAX_BODY_BYTES of the body (413 `payload_too_large` beyond), decoded as strict UTF-8. */
export async function readLimitedBody(request: Request): Promise<{ text: string; bytes: number }> {
  const bytes = await readWithin(request, MAX_BODY_BYTES)
  try {
    return { text: STRICT_UTF8.decode(bytes), bytes: bytes.byteLength }
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
