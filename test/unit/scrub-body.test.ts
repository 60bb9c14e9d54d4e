import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { luhnValid, REDACTED_CARD_NUMBER, REMOVED_CARD_FIELD } from '../../src/lib/card-data'
import {
  generateSecret,
  generateWebhookSecret,
  SECRET_PREFIXES,
  type SecretKind,
} from '../../src/lib/secrets'
import { scrubBody } from '../../src/modules/inbound/redact'
import { secretNotCardNamed } from '../helpers/secrets'

/**
 * scrubBody looks at the raw body text first and walks only with the rules that text can trigger
 * (a card-ish name, a run of 13 digits, a credential, a \u escape). Those looks must never skip what
 * a rule would catch: for any body, the result equals the one of a walk with every rule on (forced
 * by a raw text that holds every trigger).
 */
const EVERY_TRIGGER = ' \\u0000 fl_pat_ card 4111111111111111'

function withCheckDigit(prefix: string): string {
  for (let digit = 0; digit <= 9; digit++) if (luhnValid(prefix + digit)) return prefix + digit
  throw new Error('unreachable')
}

const CARD = withCheckDigit('411111111111111')
const AMEX = withCheckDigit('37828224631000')

const keyArb = fc.constantFrom(
  'email',
  'phone',
  'tel',
  'first_name',
  'company',
  'message',
  'notes',
  'payment[cc_number]',
  'cardNumber',
  'cvv2',
  'card',
  'security_code',
  'occupation',
  'span',
  'a/b~c',
  'fl_pat_0123456789abcdef0123',
)

const stringArb = fc.oneof(
  fc.constantFrom(
    'Acme Ltd',
    'lead@example.com',
    CARD,
    `${CARD.slice(0, 4)} ${CARD.slice(4, 8)} ${CARD.slice(8, 12)} ${CARD.slice(12)}`,
    `${AMEX.slice(0, 4)}-${AMEX.slice(4, 10)}-${AMEX.slice(10)}`,
    `pay%20${CARD.slice(0, 8)}%20${CARD.slice(8)}`,
    '+49 151 2345678901',
    'flwh_AbCdEfGhIjKlMnOpQrStUv',
    'token fl_sess_ZZZZyyyyXXXXwwww1234',
    'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    '2026-01-01T09:30:00Z',
  ),
  fc.string({ maxLength: 12 }),
)

const numberArb = fc.oneof(fc.constantFrom(Number(CARD), Number(AMEX), 42, 1234567890123), fc.integer())

const bodyArb = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    stringArb,
    numberArb,
    fc.constantFrom(null, true),
    tie('object'),
    fc.array(tie('value'), { maxLength: 3 }),
  ),
  object: fc.dictionary(keyArb, tie('value'), { maxKeys: 5 }),
})).object as fc.Arbitrary<Record<string, unknown>>

/** The body's JSON text with some letters and digits written as \u escapes (as a client may). */
function escapeSome(text: string, every: number): string {
  if (every === 0) return text
  let out = ''
  let count = 0
  let inString = false
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!
    if (inString && char === '\\') {
      // An escape of JSON.stringify's own (\\, \", \n, \u0000): copied as it is.
      const length = text[index + 1] === 'u' ? 6 : 2
      out += text.slice(index, index + length)
      index += length - 1
      continue
    }
    if (char === '"') inString = !inString
    if (inString && /[0-9A-Za-z]/.test(char) && ++count % every === 0) {
      out += `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`
    } else out += char
  }
  return out
}

const isPhone = (name: string) => name === 'phone' || name === 'tel'

describe('scrubBody: the raw text looks skip nothing a rule would catch', () => {
  test('any body, plain or \\u-escaped: the same lead, log and redacted paths as with every rule forced on', () => {
    fc.assert(
      fc.property(bodyArb, fc.constantFrom(0, 0, 3, 7), (generated, every) => {
        const raw = escapeSome(JSON.stringify(generated), every)
        const body = JSON.parse(raw) as Record<string, unknown>
        const looked = scrubBody(body, raw, isPhone)
        const forced = scrubBody(body, raw + EVERY_TRIGGER, isPhone)
        expect(looked.body).toEqual(forced.body)
        expect(looked.redacted).toEqual(forced.redacted)
        // Unchanged, the log keeps the text as it came (escapes and all); changed, both re-serialise.
        if (forced.body === body) expect(looked.logText).toBe(raw)
        else expect(looked.logText).toBe(forced.logText)
      }),
      { numRuns: 3000 },
    )
  })

  // Every kind of secret the service issues, generated as it issues them: a new kind is covered here
  // without editing the test (the look is built from the same prefixes).
  // Drawn so that no name reads as card data: these tests are about secrets only.
  const everySecret: Array<[string, string, string]> = [
    ...(Object.entries(SECRET_PREFIXES) as Array<[SecretKind, string]>).map(
      ([kind, prefix]): [string, string, string] => [
        kind,
        prefix,
        secretNotCardNamed(() => generateSecret(kind)),
      ],
    ),
    ['webhook signing secret', 'whsec_', secretNotCardNamed(generateWebhookSecret)],
  ]
  for (const [kind, prefix, secret] of everySecret) {
    test(`a ${kind} in a value and in a name, nothing else to look at: masked in the lead and the log`, () => {
      const body = { note: `here: ${secret}`, [secret]: 'x' }
      const raw = JSON.stringify(body)
      const scrubbed = scrubBody(body, raw, isPhone)
      expect(scrubbed.logText).not.toContain(secret)
      expect(JSON.stringify(scrubbed.body)).not.toContain(secret)
      // The masked form keeps the prefix and the first four characters after it, then an ellipsis.
      const shown = `${prefix}${secret.slice(prefix.length, prefix.length + 4)}…`
      expect(scrubbed.body.note).toStartWith(`here: ${shown}`)
      expect(Object.keys(scrubbed.body)[1]).toStartWith(shown)
      expect(scrubbed.redacted).toEqual([])
    })
  }

  test('a body with a card-ish name but no digits: the name rule still drops card fields, values untouched', () => {
    const body = { company: 'Acme', cc_number: 'x', notes: 'ring after 5' }
    const raw = JSON.stringify(body)
    const scrubbed = scrubBody(body, raw, isPhone)
    expect(scrubbed.body).toEqual({ company: 'Acme', notes: 'ring after 5' })
    expect(JSON.parse(scrubbed.logText)).toEqual({
      company: 'Acme',
      cc_number: REMOVED_CARD_FIELD,
      notes: 'ring after 5',
    })
    expect(scrubbed.redacted).toEqual(['/cc_number'])
  })

  test('a card number with no card-ish name anywhere: redacted at its JSON pointer, nested keys escaped', () => {
    const body = { 'a/b~c': [{ note: `paid with ${CARD}` }], phone: `+${CARD}` }
    const raw = JSON.stringify(body)
    const scrubbed = scrubBody(body, raw, isPhone)
    expect(scrubbed.body).toEqual({
      'a/b~c': [{ note: `paid with ${REDACTED_CARD_NUMBER}` }],
      phone: `+${CARD}`,
    })
    expect(scrubbed.redacted).toEqual(['/a~1b~0c/0/note'])
  })

  test('nothing to look at: the same body object and the raw text back', () => {
    const body = { email: 'lead@example.com', first_name: 'Ada' }
    const raw = JSON.stringify(body)
    const scrubbed = scrubBody(body, raw, isPhone)
    expect(scrubbed.body).toBe(body)
    expect(scrubbed.logText).toBe(raw)
    expect(scrubbed.redacted).toEqual([])
  })
})
