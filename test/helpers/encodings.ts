/**
 * The ways a secret can be written so that it still works once decoded, and the check that text
 * holds no usable secret in any of them. Used by the tests of logs and of stored rows.
 */

const hex = (char: string, lower = false) => {
  const code = char.charCodeAt(0).toString(16).padStart(2, '0')
  return `%${lower ? code : code.toUpperCase()}`
}
const uEscape = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`

/** Percent-encodings of a secret as a URL path segment may carry it. */
export const PERCENT_ENCODINGS: Array<[string, (secret: string) => string]> = [
  ['one body character %-encoded', (secret) => secret.replace(/_([0-9A-Za-z])/, (_, c) => `_${hex(c)}`)],
  ['the first prefix character %-encoded', (secret) => hex(secret[0]!) + secret.slice(1)],
  ['the underscore %-encoded', (secret) => secret.replace('_', '%5F')],
  ['every character %-encoded', (secret) => [...secret].map((c) => hex(c)).join('')],
  ['every character %-encoded, lower-case hex', (secret) => [...secret].map((c) => hex(c, true)).join('')],
  [
    'one character double-encoded (%2542)',
    (secret) => secret.replace(/_([0-9A-Za-z])/, (_, c) => `_%25${hex(c).slice(1)}`),
  ],
]

/** JSON `\u` escapes of a secret inside a JSON string (the text of a body). */
export const JSON_ESCAPES: Array<[string, (secret: string) => string]> = [
  ['plain', (secret) => secret],
  ['first character \\u-escaped', (secret) => uEscape(secret[0]!) + secret.slice(1)],
  ['every character \\u-escaped', (secret) => [...secret].map(uEscape).join('')],
  ['a body character \\u-escaped', (secret) => secret.slice(0, 10) + uEscape(secret[10]!) + secret.slice(11)],
]

/** Decodes %XX (repeatedly, for double encoding) and \uXXXX escapes, as a reader of the text could. */
export function decodeEverything(text: string): string {
  let current = text
  for (let round = 0; round < 4; round++) {
    const next = current
      .replace(/%([0-9A-Fa-f]{2})/g, (_, code) => String.fromCharCode(Number.parseInt(code, 16)))
      .replace(/\\u([0-9A-Fa-f]{4})/g, (_, code) => String.fromCharCode(Number.parseInt(code, 16)))
    if (next === current) break
    current = next
  }
  return current
}

/**
 * True when the text, decoded every way, still holds the secret or enough of it to use: the part
 * a mask hides (everything but the prefix, the first 4 and the last 4 characters).
 */
export function holdsSecret(text: string, secret: string): boolean {
  const prefixLength = secret.indexOf('_', secret.startsWith('fl_') ? 3 : 0) + 1
  const hidden = secret.slice(prefixLength + 4, -4)
  const decoded = decodeEverything(text)
  return decoded.includes(secret) || decoded.includes(hidden) || text.includes(hidden)
}
