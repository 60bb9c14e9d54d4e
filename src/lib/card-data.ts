import { normalizeEmail } from './contact'

/**
 * Payment card data is never stored (defence in depth: whatever a form or a client sends). Two
 * rules, one home:
 *
 * 1. A field whose *name* denotes card data is dropped: the name is split into tokens (on anything
 *    but letters and digits, and at camelCase boundaries: `payment[cc_number]` → payment, cc,
 *    number; `cardCvc` → card, cvc) and matched token by token, so `cc` or `pan` count only as
 *    whole tokens: `account`, `company`, `panel`, `span`, `occupation` are innocent.
 * 2. A *value* holding a Luhn-valid number of 13 to 19 digits, written as one group or in groups of
 *    at most 6 digits joined by single spaces, dashes, `+` or `%20`, and not glued to letters or
 *    digits, is redacted in place, wherever it is, except in the phone field.
 *
 *    A number that is part of an e-mail address (`4111111111111111@example.com`, `ada+4111…@…`,
 *    `…%40example.com` in URL-encoded text) is an address, not a card: it stays, so a lead whose
 *    address is all digits keeps its e-mail instead of losing it to the scrub.
 *
 * Known false positives, accepted: an e-mail "cc" field, an Indian PAN field, and any 13-19 digit
 * number that happens to pass Luhn (one in ten do) outside the phone field and e-mail addresses.
 */
export const REMOVED_CARD_FIELD = '[removed: card data]'
export const REDACTED_CARD_NUMBER = '[redacted: card number]'

/** Tokens that denote card data on their own (a trailing digit is ignored: cvv2, cvc2). */
const CARD_TOKENS = new Set([
  'cc',
  'cid',
  'cvn',
  'cvv',
  'cvc',
  'csc',
  'pan',
  'creditcard',
  'debitcard',
  'cardnumber',
  'cardnum',
  'ccnumber',
  'ccnum',
  'cardno',
  'ccv',
  'cvd',
  'securitycode',
])
/** With `card` (or `credit`/`debit`) beside them, these denote card data too. */
const CARD_COMPANIONS = new Set([
  'number',
  'num',
  'no',
  'nr',
  'exp',
  'expiry',
  'expiration',
  'expires',
  'expdate',
  'month',
  'year',
  'code',
  'security',
  'verification',
  'pin',
  'card',
])
// A cheap first look before tokenising: every rule above needs one of these substrings.
const MAYBE_CARD = /cc|cid|cv|csc|pan|card|secur/i

/**
 * Whether a text (a field name, or a whole body's raw JSON when nothing in it is `\u`-escaped) may
 * hold a name that rule 1 drops: without one of MAYBE_CARD's substrings none of its names can.
 */
export function mayNameCardData(text: string): boolean {
  return MAYBE_CARD.test(text)
}

/** A field name's tokens, as rule 1 reads them. */
export function cardNameTokens(name: string): string[] {
  // The second split is `XMLHttp` → `XML Http`: a capital before a capitalised word. Written as a
  // capital with a lookahead, it costs one step per character; as `([A-Z]+)([A-Z][a-z])` it tried every
  // run of capitals from every start, and a 60 KB field name of capitals held the event loop 2.6 s
  // (test/unit/regex-safety.test.ts now checks every pattern of src/ for such backtracking).
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z])(?=[A-Z][a-z])/g, '$1 ')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean)
    .map((token) => token.replace(/(?<=[a-z])\d+$/, ''))
}

/** True when a field name denotes card data (rule 1). */
export function isCardFieldName(name: string): boolean {
  if (!mayNameCardData(name)) return false
  const tokens = cardNameTokens(name)
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index]!
    if (CARD_TOKENS.has(token)) return true
    if (token === 'security' && tokens[index + 1] === 'code') return true
    if (token === 'card' || token === 'credit' || token === 'debit') {
      const neighbours = [tokens[index - 1], tokens[index + 1]]
      if (neighbours.some((neighbour) => neighbour !== undefined && CARD_COMPANIONS.has(neighbour)))
        return true
    }
  }
  return false
}

export function luhnValid(digits: string): boolean {
  let sum = 0
  let double = false
  for (let index = digits.length - 1; index >= 0; index--) {
    let digit = digits.charCodeAt(index) - 48
    if (double) {
      digit *= 2
      if (digit > 9) digit -= 9
    }
    sum += digit
    double = !double
  }
  return sum % 10 === 0
}

const MAX_GROUP = 6
/**
 * Digits with single separators between them (space, dash, and the `+` or `%20` a space becomes in
 * a URL); at least 13 digits to be worth a look. The number must stand on its own: not glued to a
 * letter or digit on either side (a `%XX` escape before it counts as a separator), so a run of
 * digits inside a hex id is not read as a card number. Each step is one alternative that starts with
 * its own character (a digit, a separator, `%`): written as an optional separator before a digit,
 * the same pattern took JavaScriptCore ~40 ms over a 100 KB run of digit groups (a whole body's
 * worth, on the event loop), this way ~0.3 ms (test/integration/card-data.test.ts holds the two
 * to the same matches).
 */
export const DIGIT_RUN =
  /(?:(?<=%[0-9A-Fa-f]{2})|(?<![A-Za-z0-9%]))\d(?:\d|[ +-]\d|%20\d){12,}(?![A-Za-z0-9])/g

/**
 * The text with every Luhn-valid 13-19 digit number replaced by REDACTED_CARD_NUMBER (rule 2).
 * A run of digit groups (`4111 1111 1111 1111 123`) is searched group by group, so a card number
 * followed by another number is still found. A single group longer than 19 digits is no card, and
 * neither are groups of more than 6 digits joined by separators (so no UUID is ever taken for one).
 * A number wholly inside a word that reads as an e-mail address stays (emailAddressSpans).
 */
export function redactCardNumbers(text: string): string {
  if (text.length < 13) return text
  // Found once, on the first number: the runs come in order, so one cursor walks the spans.
  let addresses: Array<[number, number]> | undefined
  let next = 0
  return text.replace(DIGIT_RUN, (run, offset: number) => {
    addresses ??= emailAddressSpans(text)
    while (next < addresses.length && addresses[next]![1] <= offset) next++
    const address = addresses[next]
    if (address && address[0] <= offset && offset + run.length <= address[1]) return run
    const parts = run.split(/([ +-]|%20)/)
    const groups = parts.filter((_, index) => index % 2 === 0)
    const separators = parts.filter((_, index) => index % 2 === 1)
    let result = ''
    let changed = false
    let index = 0
    while (index < groups.length) {
      let found = -1
      let digits = ''
      for (let end = index; end < groups.length; end++) {
        // Written in groups, a card number has short ones (4-4-4-4, 4-6-5, 4-4-4-4-3): a longer
        // group beside a separator is something else (a UUID's 8-4-4-4-12 of digits, say).
        if (end > index && (groups[index]!.length > MAX_GROUP || groups[end]!.length > MAX_GROUP)) break
        digits += groups[end]
        if (digits.length > 19) break
        if (digits.length >= 13 && luhnValid(digits)) found = end
      }
      if (index > 0) result += separators[index - 1]
      if (found >= 0) {
        result += REDACTED_CARD_NUMBER
        changed = true
        index = found + 1
      } else {
        result += groups[index]
        index++
      }
    }
    return changed ? result : run
  })
}

/** A word: up to spaces, quotes, brackets, list and query punctuation. */
const WORD = /[^\s"'`<>()[\]{},;:=&|\\]+/g

/**
 * The [start, end) of every word of `text` that is an e-mail address by the lead's own rule
 * (normalizeEmail), once a URL-escaped `@` is decoded, in order. One pass over the text, however many
 * numbers it holds.
 */
function emailAddressSpans(text: string): Array<[number, number]> {
  const spans: Array<[number, number]> = []
  if (!text.includes('@') && !/%40/i.test(text)) return spans
  for (const { 0: word, index } of text.matchAll(WORD)) {
    if (!word.includes('@') && !/%40/i.test(word)) continue
    if (normalizeEmail(word.replace(/%40/gi, '@')) !== null) spans.push([index, index + word.length])
  }
  return spans
}

// DIGIT_RUN's shape without its edges: 13 digits with single separators, the least rule 2 reads.
const MAYBE_CARD_NUMBER = /\d(?:(?:[ +-]|%20)?\d){12}/

/**
 * Whether a text (a value, or a whole body's raw JSON when nothing in it is `\u`-escaped: JSON
 * numbers are digits there too) may hold a number that rule 2 redacts.
 */
export function mayHoldCardNumber(text: string): boolean {
  return MAYBE_CARD_NUMBER.test(text)
}

/** True for a JSON number that reads as a card number (rule 2 for numeric values). */
export function isCardNumberValue(value: number): boolean {
  if (!Number.isInteger(value) || value < 1e12) return false
  const digits = BigInt(value).toString()
  return digits.length >= 13 && digits.length <= 19 && luhnValid(digits)
}
