import { beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { AppContext } from '../../src/context'
import {
  cardNameTokens,
  DIGIT_RUN,
  isCardFieldName,
  luhnValid,
  REDACTED_CARD_NUMBER,
  REMOVED_CARD_FIELD,
  redactCardNumbers,
} from '../../src/lib/card-data'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import { forbiddenIn } from '../helpers/forbidden'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 9: card data never reaches the database through the inbound endpoint. Card-named
 * fields are dropped from the lead (the delivery log keeps the name, not the value); Luhn-valid
 * 13-19 digit numbers are redacted in every value but the phone field. Rows are read raw.
 */
beforeAll(() => testDatabase(), 60_000)

/** `prefix` completed with its Luhn check digit. */
function withCheckDigit(prefix: string): string {
  for (let digit = 0; digit <= 9; digit++) if (luhnValid(prefix + digit)) return prefix + digit
  throw new Error('unreachable')
}

const CARD_NAMES = [
  'payment[cc_number]',
  'payment[cc_cid]',
  'payment[cc_exp_month]',
  'payment[cc_exp_year]',
  'cc_number',
  'cc-number',
  'cc_cid',
  'cc_exp_month',
  'ccNumber',
  'CCNum',
  'cid',
  'cvn',
  'cvv',
  'CVV2',
  'cvc',
  'card_cvc',
  'csc',
  'pan',
  'security_code',
  'securityCode',
  'card_number',
  'cardNumber',
  'card-no',
  'card_expiry',
  'cardExpiration',
  'credit_card',
  'creditCardNumber',
  'billing[card][number]',
]
const INNOCENT_NAMES = [
  'account',
  'company',
  'panel',
  'occupation',
  'span',
  'accent',
  'success',
  'accident',
  'japan',
  'expiry',
  'discount_code',
  'cardholder',
  'cycle',
  'decision',
  'participants',
  'scope',
]

const VISA = withCheckDigit('411111111111111')
const CARD_NUMBERS: Array<[string, string]> = [
  ['16 digits', VISA],
  ['16 digits in groups of 4 with spaces', VISA.replace(/(\d{4})(?=\d)/g, '$1 ')],
  ['16 digits with dashes', VISA.replace(/(\d{4})(?=\d)/g, '$1-')],
  ['13 digits', withCheckDigit('422222222222')],
  ['15 digits (Amex)', withCheckDigit('37828224631000')],
  ['19 digits', withCheckDigit('622222222222222222')],
  ['followed by a CVV', `${VISA} 123`],
]

const email = () => uniqueEmail('card')

async function rawRows(ctx: AppContext, sourceId: string) {
  const logs = await ctx.database.query<{ body: string; id: string }>(
    'select * from delivery_logs where source_id = $1 order by id',
    [sourceId],
  )
  const leadRows = await ctx.database.query<{
    custom_fields: Record<string, unknown>
    phone_raw: string | null
  }>('select * from leads where source_id = $1 order by id', [sourceId])
  return { logs, leads: leadRows }
}

async function setup(fieldMapping: Record<string, string> = {}) {
  const { app, ctx } = await makeTestApp()
  const organization = await createOrganization(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, { fieldMapping })
  const post = (json: unknown) => app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { json }))
  return { app, ctx, organization, source, post }
}

describe('card-named fields are dropped', () => {
  test('every card name: not in the lead, named (without the value) in the delivery log', async () => {
    const { ctx, source, post } = await setup()
    for (const name of CARD_NAMES) {
      // Letters no UUID, timestamp or id holds, so a substring check cannot match by chance.
      const secretValue = `SECRET-${name}-${Math.floor(Math.random() * 1e6)}`
      const response = await post({ email: email(), [name]: secretValue, keep: 'yes' })
      expect({ name, status: response.status }).toEqual({ name, status: 200 })
      const { logs, leads } = await rawRows(ctx, source.id)
      const lead = leads.at(-1)!
      const log = logs.find((row) => Object.hasOwn(JSON.parse(row.body), name))
      expect({ name, custom: lead.custom_fields }).toEqual({ name, custom: { keep: 'yes' } })
      expect({ name, logged: log && JSON.parse(log.body)[name] }).toEqual({
        name,
        logged: REMOVED_CARD_FIELD,
      })
      for (const row of [...logs, ...leads]) expect(JSON.stringify(row)).not.toContain(secretValue)
    }
  })

  test('innocent names are kept, values and all', async () => {
    const { ctx, source, post } = await setup()
    const body: Record<string, string> = { email: email() }
    for (const name of INNOCENT_NAMES) body[name] = `value of ${name}`
    expect((await post(body)).status).toBe(200)
    const { leads, logs } = await rawRows(ctx, source.id)
    const { email: _, ...custom } = body
    expect(leads[0]!.custom_fields).toEqual(custom)
    expect(JSON.parse(logs[0]!.body)).toEqual(body)
  })

  test('the issue’s checkout form, nested objects and arrays: dropped at any depth', async () => {
    const { ctx, source, post } = await setup()
    const body = {
      email: email(),
      'payment[cc_number]': VISA,
      'payment[cc_cid]': '737',
      'payment[cc_exp_month]': '03',
      'payment[cc_exp_year]': '2030',
      pan: VISA,
      security_code: '1234',
      payment: { method: 'card', card: { number: VISA, cvc: '737', holder: 'Ada' } },
      items: [{ sku: 'A1', cvv: '999' }],
    }
    expect((await post(body)).status).toBe(200)
    const { leads, logs } = await rawRows(ctx, source.id)
    expect(leads[0]!.custom_fields).toEqual({
      payment: { method: 'card', card: { number: REDACTED_CARD_NUMBER, holder: 'Ada' } },
      items: [{ sku: 'A1' }],
    })
    expect(JSON.parse(logs[0]!.body)).toEqual({
      email: body.email,
      'payment[cc_number]': REMOVED_CARD_FIELD,
      'payment[cc_cid]': REMOVED_CARD_FIELD,
      'payment[cc_exp_month]': REMOVED_CARD_FIELD,
      'payment[cc_exp_year]': REMOVED_CARD_FIELD,
      pan: REMOVED_CARD_FIELD,
      security_code: REMOVED_CARD_FIELD,
      payment: {
        method: 'card',
        card: { number: REDACTED_CARD_NUMBER, cvc: REMOVED_CARD_FIELD, holder: 'Ada' },
      },
      items: [{ sku: 'A1', cvv: REMOVED_CARD_FIELD }],
    })
    // Short values (a CVV) are looked for as parsed values, never as substrings: the body also
    // holds a random UUID in the e-mail, where `737` or `999` turns up now and then.
    for (const dump of [logs[0]!.body, JSON.stringify(leads[0]!.custom_fields)]) {
      expect(forbiddenIn(dump, [VISA, '737', '2030', '1234', '999'], [])).toEqual([])
    }
    expect(JSON.stringify([...logs, ...leads])).not.toContain(VISA)
  })
})

describe('card numbers in values are redacted, except in the phone field', () => {
  for (const [label, number] of CARD_NUMBERS) {
    test(`${label}: in a lead field, a custom field, a nested value, an array, attribution and as a JSON number`, async () => {
      const { ctx, source, post } = await setup()
      const digits = number.replace(/\D/g, '').slice(0, 16)
      const body = {
        email: email(),
        first_name: `Ada ${number}`,
        status: number,
        note: `my card is ${number}, thanks`,
        nested: { deeper: [`${number}`] },
        attribution: { utm_content: number },
        page_url: `https://shop.test/pay?n=${number.replaceAll(' ', '+')}&m=${number.replaceAll(' ', '%20')}`,
        amount: Number(VISA),
      }
      const response = await post(body)
      expect(response.status).toBe(200)
      const { leads, logs } = await rawRows(ctx, source.id)
      for (const row of [...logs, ...leads]) {
        const dump = JSON.stringify(row)
        const forms = [digits, number, number.replaceAll(' ', '+'), number.replaceAll(' ', '%20')]
        expect({ label, holds: forms.some((form) => dump.includes(form)) }).toEqual({ label, holds: false })
      }
      expect(leads[0]!.custom_fields).toMatchObject({
        note: expect.stringContaining(REDACTED_CARD_NUMBER),
        nested: { deeper: [expect.stringContaining(REDACTED_CARD_NUMBER)] },
        amount: REDACTED_CARD_NUMBER,
      })
      expect(JSON.parse(logs[0]!.body).note).toContain(REDACTED_CARD_NUMBER)
    })
  }

  test('the phone field keeps its digits, named directly or through the field mapping', async () => {
    const phone = `+${withCheckDigit('49151234567890')}`
    expect(luhnValid(phone.slice(1))).toBe(true)
    for (const [mapping, field] of [
      [{}, 'phone_raw'],
      [{ tel: 'phone_raw' }, 'tel'],
    ] as const) {
      const { ctx, source, post } = await setup(mapping)
      expect((await post({ [field]: phone, email: email(), other: phone })).status).toBe(200)
      const { leads, logs } = await rawRows(ctx, source.id)
      expect(leads[0]!.phone_raw).toBe(phone)
      expect(leads[0]!.custom_fields).toEqual({ other: `+${REDACTED_CARD_NUMBER}` })
      expect(JSON.parse(logs[0]!.body)[field]).toBe(phone)
    }
  })

  test('rejected requests: an unparseable body is stored with card numbers redacted too', async () => {
    const { app, ctx, organization } = await setup()
    const { source, apiKey } = await createSource(ctx, organization.id)
    const response = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: `{"email":"x","cc":"${VISA}"`,
        headers: { 'content-type': 'application/json', referer: `https://shop.test/?card=${VISA}` },
      }),
    )
    expect(response.status).toBe(400)
    const { logs } = await rawRows(ctx, source.id)
    expect(JSON.stringify(logs)).not.toContain(VISA)
  })

  // JSON may spell any character as a \u escape: the cheap first look at the raw text (a card-ish
  // name or 13 digits in a row) must not be the only gate, or an escaped name or number slips by.
  const escapeEvery = (text: string, every: number) =>
    [...text]
      .map((char, index) =>
        index % every === 0 ? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}` : char,
      )
      .join('')
  const ESCAPED_FORMS: Array<[label: string, json: (email: string) => string, removedField: string | null]> =
    [
      [
        'every digit of a card number escaped',
        (e) => `{"email":"${e}","note":"${escapeEvery(VISA, 1)}"}`,
        null,
      ],
      ['every other digit escaped', (e) => `{"email":"${e}","note":"mine: ${escapeEvery(VISA, 2)}"}`, null],
      ['one digit in five escaped', (e) => `{"email":"${e}","note":"${escapeEvery(VISA, 5)}"}`, null],
      [
        'a card-named field, its name escaped',
        (e) => `{"email":"${e}","${escapeEvery('cvv', 1)}":"SECRET-321"}`,
        'cvv',
      ],
      [
        'a card-named field, one letter escaped',
        (e) => `{"email":"${e}","card\\u005fnumber":"SECRET-x"}`,
        'card_number',
      ],
      [
        'a camelCase card name, partly escaped',
        (e) => `{"email":"${e}","${escapeEvery('cardNumber', 3)}":"SECRET-x"}`,
        'cardNumber',
      ],
    ]
  for (const [label, json, removedField] of ESCAPED_FORMS) {
    test(`escaped in the JSON text: ${label}`, async () => {
      const { app, ctx, organization } = await setup()
      const { source, apiKey } = await createSource(ctx, organization.id)
      // A fixed address: a random one holds `cc` or `pan` now and then, which opens the gate by chance.
      const text = json('ada@example.com')
      // The form under test really is escaped: the raw text shows neither the number nor the name.
      expect(text).not.toContain(VISA)
      if (removedField) expect(text).not.toContain(removedField)
      const response = await app.handle(
        request('POST', `/api/webhook/lead/${apiKey}`, {
          body: text,
          headers: { 'content-type': 'application/json' },
        }),
      )
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ status: 'created', success: true, lead_id: expect.any(String) })
      const { leads, logs } = await rawRows(ctx, source.id)
      const dump = JSON.stringify([...logs, ...leads])
      expect({ label, holds: dump.includes(VISA) || dump.includes('SECRET') }).toEqual({
        label,
        holds: false,
      })
      if (removedField) {
        expect(Object.hasOwn(leads[0]!.custom_fields, removedField)).toBe(false)
        expect(JSON.parse(logs[0]!.body)[removedField]).toBe(REMOVED_CARD_FIELD)
      } else {
        expect(String(leads[0]!.custom_fields.note)).toContain(REDACTED_CARD_NUMBER)
        expect(String(JSON.parse(logs[0]!.body).note)).toContain(REDACTED_CARD_NUMBER)
      }
    })
  }

  test('GET …/logs/{id} shows which fields were removed, never the values', async () => {
    const { app, ctx, organization, source, post } = await setup()
    const owner = await createUser(ctx, organization.id)
    const session = await createSession(ctx, owner.id)
    expect((await post({ email: email(), cvv: '321', cc_number: VISA })).status).toBe(200)
    const list = await (
      await app.handle(request('GET', `/api/webhook/sources/${source.id}/logs`, { token: session }))
    ).json()
    const single = await app.handle(
      request('GET', `/api/webhook/sources/${source.id}/logs/${list.data[0].id}`, { token: session }),
    )
    expect(single.status).toBe(200)
    const entry = await single.json()
    expect(entry.body).toMatchObject({ cvv: REMOVED_CARD_FIELD, cc_number: REMOVED_CARD_FIELD })
    expect(JSON.stringify(entry)).not.toContain(VISA)
  })
})

/**
 * An address made of digits (`<13-19 Luhn-valid digits>@…`) is an address, not a card number: before,
 * the scrub redacted its digits, the e-mail field no longer held an address, and a lead whose only
 * contact was that address was answered `missing_contact` and lost. Every shape of address, in the
 * e-mail field, in free text, in a URL-encoded query and in the raw text of a refused body; a card
 * number beside it in the same text is still redacted.
 */
const ADDRESS_SHAPES: Array<[label: string, address: (digits: string) => string]> = [
  ['the whole local part', (digits) => `${digits}@example.com`],
  ['after a dot', (digits) => `ada.${digits}@example.com`],
  ['before a plus tag', (digits) => `${digits}+leads@example.com`],
  ['after a plus tag', (digits) => `ada+${digits}@mail.example.com`],
  ['in dashed groups', (digits) => `${digits.replace(/(\d{4})(?=\d)/g, '$1-')}@example.com`],
]

describe('an e-mail address is never taken for a card number', () => {
  for (const [label, address] of ADDRESS_SHAPES) {
    for (const [numberLabel, digits] of [
      ['16 digits', VISA],
      ['13 digits', withCheckDigit('422222222222')],
      ['19 digits', withCheckDigit('622222222222222222')],
    ] as const) {
      test(`${label}, ${numberLabel}: the lead keeps its address; a card number beside it is redacted`, async () => {
        const { ctx, source, post } = await setup()
        const mail = address(digits)
        const response = await post({
          email: mail,
          note: `write to ${mail} or charge ${VISA}`,
          page_url: `https://shop.test/thanks?email=${encodeURIComponent(mail)}&card=${VISA}`,
        })
        expect(response.status).toBe(200)
        expect(await response.json()).toEqual({
          status: 'created',
          success: true,
          lead_id: expect.any(String),
        })
        const { leads, logs } = await rawRows(ctx, source.id)
        const lead = leads[0] as unknown as { email: string; custom_fields: Record<string, unknown> }
        expect(lead.email).toBe(mail)
        expect(lead.custom_fields.note).toBe(`write to ${mail} or charge ${REDACTED_CARD_NUMBER}`)
        const logged = JSON.parse(logs[0]!.body)
        expect(logged.email).toBe(mail)
        expect(logged.note).toBe(`write to ${mail} or charge ${REDACTED_CARD_NUMBER}`)
        expect(logged.page_url).toBe(
          `https://shop.test/thanks?email=${encodeURIComponent(mail)}&card=${REDACTED_CARD_NUMBER}`,
        )
      })
    }
  }

  test('a refused body keeps the address in its raw text and loses the card number', async () => {
    const { app, ctx, organization } = await setup()
    const { source, apiKey } = await createSource(ctx, organization.id)
    const mail = `${VISA}@example.com`
    const response = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: `email=${encodeURIComponent(mail)}&card=${VISA}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    )
    expect(response.status).toBe(400)
    const { logs } = await rawRows(ctx, source.id)
    expect(logs).toHaveLength(1)
    expect(JSON.stringify(logs[0]!.body)).toContain(`${VISA}%40example.com`)
    expect(JSON.stringify(logs[0]!.body)).toContain(`card=${REDACTED_CARD_NUMBER}`)
  })
})

describe('the rules themselves (property tests)', () => {
  /** Any Luhn-valid number of 13 to 19 digits. */
  const luhnNumber = fc
    .integer({ min: 12, max: 18 })
    .chain((length) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: length, maxLength: length }))
    .map((prefix) => withCheckDigit(prefix.join('')))

  test('any Luhn-valid 13-19 digit number, whole or in groups of up to 6 joined by a separator, in any text, is redacted', () => {
    fc.assert(
      fc.property(
        fc.tuple(
          luhnNumber,
          fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 19, maxLength: 19 }),
          fc.constantFrom('', ' ', '-', '+', '%20'),
          fc.constantFrom('', 'card: ', '(', 'pay ', 'n=', 'a%20'),
          fc.constantFrom('', ' thanks', '.', ' 123', ')', '%2C'),
        ),
        ([digits, sizes, separator, before, after]) => {
          const groups: string[] = []
          for (let at = 0, next = 0; at < digits.length; next++) {
            const size = separator ? sizes[next]! : digits.length
            groups.push(digits.slice(at, at + size))
            at += size
          }
          const redacted = redactCardNumbers(`${before}${groups.join(separator)}${after}`)
          return redacted.includes(REDACTED_CARD_NUMBER) && !redacted.replace(/\D/g, '').includes(digits)
        },
      ),
      { numRuns: 3000 },
    )
  })

  test('a Luhn-valid number inside an e-mail address stays, in any text around it; the same number alone is redacted', () => {
    fc.assert(
      fc.property(
        fc.tuple(
          luhnNumber,
          fc.constantFrom(...ADDRESS_SHAPES.map(([, shape]) => shape)),
          fc.constantFrom('', 'mail ', 'mailto:', '<', '"', '(', 'email=', 'to: ', '{"email":"'),
          fc.constantFrom('', '>', '"', ')', '.', ', thanks', '&x=1', '"}'),
          fc.boolean(),
        ),
        ([digits, shape, before, after, urlEncoded]) => {
          const address = urlEncoded ? shape(digits).replace('@', '%40') : shape(digits)
          const text = `${before}${address}${after} card ${digits}`
          return redactCardNumbers(text) === `${before}${address}${after} card ${REDACTED_CARD_NUMBER}`
        },
      ),
      { numRuns: 3000 },
    )
    // Not an address: no domain, no dot in it, the digits glued to more than the address, or a
    // word longer than any address (254 characters, each perhaps URL-escaped).
    for (const text of [
      `${VISA}@`,
      `${VISA}@localhost`,
      `${VISA} @example.com`,
      `pay ${VISA}@ once`,
      `${'a.'.repeat(400)}${VISA}@example.com`,
      `${VISA}@${'example.'.repeat(100)}com`,
    ]) {
      expect({ text, redacted: redactCardNumbers(text).includes(REDACTED_CARD_NUMBER) }).toEqual({
        text,
        redacted: true,
      })
    }
  })

  test('the digit-run pattern finds what the pattern as first written found, on any text', () => {
    // The first pattern (an optional separator before each digit) was ~100× slower on a long run of
    // digit groups; the current one must match the same runs wherever they are.
    const first = /(?:(?<=%[0-9A-Fa-f]{2})|(?<![A-Za-z0-9%]))\d(?:(?:[ +-]|%20)?\d){12,}(?![A-Za-z0-9])/g
    const runs = (text: string, pattern: RegExp) => [...text.matchAll(pattern)].map((m) => [m.index, m[0]])
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            // digit groups, so that runs of 13 digits and more are common
            fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 6 }).map((d) => d.join('')),
            // separators and their near misses, and what may stand around a run
            fc.constantFrom(' ', '-', '+', '%20', '%2', '%2C', '%41', '  ', '--', 'a', 'F', '@', '.', '%'),
          ),
          { maxLength: 40 },
        ),
        (pieces) => {
          const text = pieces.join('')
          expect(runs(text, DIGIT_RUN)).toEqual(runs(text, first))
          // Redaction, which reads those runs, changes nothing outside them.
          return runs(text, first).length > 0 || redactCardNumbers(text) === text
        },
      ),
      { numRuns: 5000 },
    )
  })

  test('UUIDs are never taken for card numbers, even all in digits', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 32, maxLength: 32 }), (digits) => {
        const hex = digits.join('')
        const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
        const text = `lead-${uuid}@example.com order ${uuid}`
        return redactCardNumbers(text) === text
      }),
      { numRuns: 3000 },
    )
    for (let index = 0; index < 2000; index++) {
      const text = uniqueEmail('lead')
      expect(redactCardNumbers(text)).toBe(text)
    }
  })

  test('numbers that are not cards stay: too short, too long, not Luhn-valid, phone numbers', () => {
    const notLuhn = `${VISA.slice(0, -1)}${(Number(VISA.at(-1)) + 1) % 10}`
    for (const text of [
      '123456789012',
      notLuhn,
      '1'.repeat(25),
      'call +44 20 7946 0958',
      '2026-01-01T09:30:00Z',
    ]) {
      expect(redactCardNumbers(text)).toBe(text)
    }
  })

  test('name tokens: card names and their camelCase/bracket variants match, innocent names never do', () => {
    for (const name of CARD_NAMES) expect({ name, card: isCardFieldName(name) }).toEqual({ name, card: true })
    for (const name of INNOCENT_NAMES)
      expect({ name, card: isCardFieldName(name) }).toEqual({ name, card: false })
    // Innocent words that contain a card token as a substring, in any case and with any decoration.
    fc.assert(
      fc.property(
        fc.constantFrom(...INNOCENT_NAMES),
        fc.constantFrom('', 'form[', 'data.', 'x_'),
        fc.constantFrom('', ']', '_1', '.value'),
        fc.boolean(),
        (word, before, after, upper) =>
          !isCardFieldName(`${before}${upper ? word.toUpperCase() : word}${after}`),
      ),
    )
  })

  test('name tokens: any name is judged as by the tokenizer as first written', () => {
    // The first tokenizer split `XMLHttp` with `([A-Z]+)([A-Z][a-z])`, which backtracked over runs of
    // capitals (a long name of them took seconds); the current one must cut every name the same way.
    const firstTokens = (name: string) =>
      name
        .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
        .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
        .toLowerCase()
        .split(/[^a-z0-9]+/)
        .filter(Boolean)
        .map((token) => token.replace(/(?<=[a-z])\d+$/, ''))
    const pieces = [
      'card',
      'Card',
      'CARD',
      'cc',
      'CC',
      'Number',
      'NUM',
      'no',
      'cvv',
      'CVV',
      'Exp',
      'A',
      'B',
      'x',
      'Ab',
    ]
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constantFrom(...pieces), fc.constantFrom('_', '-', '[', ']', '.', '2', ' ')), {
          maxLength: 12,
        }),
        (parts) => {
          const name = parts.join('')
          expect({ name, tokens: cardNameTokens(name) }).toEqual({ name, tokens: firstTokens(name) })
        },
      ),
      { numRuns: 5000 },
    )
  })
})
