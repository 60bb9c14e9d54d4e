import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { uniqueEmail } from '../helpers/emails'
import { createSource } from '../helpers/factories'
import { type FormPageCase, fixtureHtml, runFormPage } from './form-pages'
import {
  type BrowserHarness,
  eventually,
  forbiddenIn,
  loaded,
  SETUP_TIMEOUT_MS,
  startBrowserHarness,
  TIMEOUT_MS,
} from './support'

/**
 * What tracker.js must never send, proven on the request body the browser sent: card data by name,
 * autocomplete or value; passwords, also after a "show password" toggle; credential forms; builder
 * plumbing and unmarked hidden inputs; secrets in URLs. Plus the console when nothing can be sent or
 * the server calls a lead spam.
 */
let harness: BrowserHarness

beforeAll(async () => {
  harness = await startBrowserHarness()
}, SETUP_TIMEOUT_MS)
afterEach(() => harness.closeContexts())
afterAll(() => harness?.stop())

/** `digits` followed by the Luhn check digit that makes the whole number valid. */
function withLuhnDigit(digits: string): string {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]) * (i % 2 === 0 ? 2 : 1)
    if (digit > 9) digit -= 9
    sum += digit
  }
  return `${digits}${(10 - (sum % 10)) % 10}`
}

/** A fresh Luhn-valid number of `length` digits (a unique address per run: leads are deduplicated by it). */
const luhnDigits = (length: number) =>
  withLuhnDigit(
    Array.from({ length: length - 1 }, (_, i) => (i === 0 ? 4 : Math.floor(Math.random() * 10))).join(''),
  )
/** An address in a free-text field, its local part a Luhn-valid number. */
const DIGITS_ADDRESS = `${withLuhnDigit('411111111111111')}@example.org`

// Luhn-valid numbers of every length 13–19, some written with spaces or dashes as people type them.
const CARD_NUMBERS = [13, 14, 15, 16, 17, 18, 19].map((length) => withLuhnDigit('4'.padEnd(length - 1, '7')))
CARD_NUMBERS.push('4000 0566 5566 5556', '5555-5555-5555-4444', '3782 822463 10005')

// Every spelling of card data by name (values are innocuous: the name alone must keep them out).
// Generated values are upper-case: forbiddenIn also looks inside longer strings, and the lower-case
// random e-mail addresses must never match one by chance.
const CARD_NAMES = [
  'payment[cc_number]',
  'payment[cc_cid]',
  'payment[cc_exp_month]',
  'payment[cc_exp_year]',
  'cc-number',
  'cc_exp',
  'ccnum',
  'ccexp',
  'billing[cc-cvc]',
  'card_number',
  'cardNumber',
  'CardHolder',
  'cid',
  'cvn',
  'cvv',
  'cvv2',
  'cvc',
  'csc',
  'pan',
  'security_code',
  'securityCode',
  'exp',
  'expiry',
  'expiration_date',
  'exp_month',
  'exp-year',
]
const CARD_AUTOCOMPLETE = [
  'cc-name',
  'cc-number',
  'cc-exp',
  'cc-exp-month',
  'cc-exp-year',
  'cc-csc',
  'cc-type',
]

// Anti-forgery tokens and builder plumbing in visible inputs (the hidden-input rule does not apply).
const PLUMBING_NAMES = [
  '_wpnonce',
  'contact-form-nonce',
  '_token',
  'csrf_token',
  'csrfmiddlewaretoken',
  'authenticity_token',
  '__RequestVerificationToken',
  'g-recaptcha-response',
  'cf-turnstile-response',
  'hs_context',
  'gform_unique_id',
  '_wp_http_referer',
]

function input(name: string, value: string, extra = ''): string {
  return `<input name="${name}" value="${value}" ${extra}>`
}

const CASES: FormPageCase[] = [
  {
    fixture: 'magento-checkout',
    steps: [
      ['fill', '#customer-email', '{email}'],
      ['fill', '[name=firstname]', 'Valerie'],
      ['fill', '[name=lastname]', 'Thomas'],
      ['fill', '[name=telephone]', '+1 410 555 0134'],
      ['fill', '[name="payment[cc_number]"]', '4111111111111111'],
      ['select', '[name="payment[cc_exp_month]"]', '3'],
      ['select', '[name="payment[cc_exp_year]"]', '2030'],
      ['fill', '[name="payment[cc_cid]"]', '737'],
      ['click', 'button.checkout'],
    ],
    ownSubmit: '/done/magento-checkout',
    lead: { first_name: 'Valerie', last_name: 'Thomas', phone_raw: '+1 410 555 0134', custom_fields: {} },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw'],
    forbiddenValues: ['4111111111111111', '737', '2030', 'VI', 'Xy7Zk3LmN9pQ2rSt'],
    forbiddenNames: [
      'payment_cc_number',
      'payment_cc_cid',
      'payment_cc_exp_month',
      'payment_cc_exp_year',
      'form_key',
    ],
  },
  {
    fixture: 'custom-card',
    steps: [
      ['fill', '[name=name]', 'Ellen Ochoa'],
      ['fill', '[name=email]', '{email}'],
      ['fill', '[name=pan]', '4242424242424242'],
      ['fill', '[name=exp]', '12/30'],
      ['fill', '[name=security_code]', '123'],
      ['fill', '[name=account_ref]', '5555 5555 5555 4444'],
      ['fill', '[name=notes]', 'Please use my card 4000 0566 5566 5556 for this'],
      // One digit off a card number: not Luhn-valid, so it is an ordinary value and is sent.
      ['fill', '[name=order_number]', '4242424242424241'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/custom-card',
    lead: {
      first_name: 'Ellen',
      last_name: 'Ochoa',
      phone_raw: null,
      custom_fields: { order_number: '4242424242424241' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'order_number'],
    forbiddenValues: ['4242424242424242', '12/30', '123', '5555 5555 5555 4444', '4000 0566 5566 5556'],
    forbiddenNames: ['pan', 'exp', 'security_code', 'account_ref', 'notes'],
  },
  {
    // An address made of digits that pass the Luhn check is an address, not a card number: the
    // tracker once dropped the e-mail field for it, and the lead had no contact.
    fixture: 'digits-address',
    html: `<form action="/done/digits-address" method="post">
      <label>E-mail <input type="email" name="email"></label>
      <label>Notes <textarea name="notes"></textarea></label>
      <label>Payment reference <input name="payment_ref"></label>
      <button type="submit">Send</button>
    </form>`,
    email: () => `${luhnDigits(16)}@example.com`,
    steps: [
      ['fill', '[name=email]', '{email}'],
      ['fill', '[name=notes]', `Copy to ${DIGITS_ADDRESS}, or to ${DIGITS_ADDRESS}.`],
      ['fill', '[name=payment_ref]', '4242424242424242'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/digits-address',
    lead: {
      first_name: null,
      last_name: null,
      phone_raw: null,
      custom_fields: { notes: `Copy to ${DIGITS_ADDRESS}, or to ${DIGITS_ADDRESS}.` },
    },
    sentKeys: ['email', 'notes'],
    forbiddenValues: ['4242424242424242'],
    forbiddenNames: ['payment_ref'],
  },
  {
    fixture: 'all-card-data',
    html: `<form action="/done/all-card-data" method="post">
      <label>E-mail <input type="email" name="email"></label>
      ${CARD_NAMES.map((name, i) => input(name, `BY-NAME-${i}`)).join('\n')}
      ${CARD_AUTOCOMPLETE.map((token, i) => input(`field_a${i}x`, `BY-AUTOCOMPLETE-${i}`, `autocomplete="${token}"`)).join('\n')}
      ${CARD_NUMBERS.map((number, i) => input(`reference_${i}`, number)).join('\n')}
      ${input('twelve_digits', withLuhnDigit('42424242424'))}
      ${input('not_luhn', '4242424242424241')}
      ${input('ccpa_consent', 'CCPA-YES')}
      ${input('expected_budget', '5000')}
      <button type="submit">Pay</button></form>`,
    steps: [
      ['fill', '[name=email]', '{email}'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/all-card-data',
    // Only the controls remain: a 12-digit Luhn-valid number, a 16-digit one that fails Luhn, and
    // names that merely start like card tokens (`ccpa`, `expected`).
    lead: {
      first_name: null,
      last_name: null,
      phone_raw: null,
      custom_fields: {
        twelve_digits: withLuhnDigit('42424242424'),
        not_luhn: '4242424242424241',
        ccpa_consent: 'CCPA-YES',
        expected_budget: '5000',
      },
    },
    sentKeys: ['email', 'twelve_digits', 'not_luhn', 'ccpa_consent', 'expected_budget'],
    forbiddenValues: [
      ...CARD_NAMES.map((_, i) => `BY-NAME-${i}`),
      ...CARD_AUTOCOMPLETE.map((_, i) => `BY-AUTOCOMPLETE-${i}`),
      ...CARD_NUMBERS,
    ],
  },
  {
    fixture: 'all-plumbing',
    html: `<form action="/done/all-plumbing" method="post">
      <label>E-mail <input type="email" name="email"></label>
      ${PLUMBING_NAMES.map((name, i) => input(name, `PLUMBING-${i}`)).join('\n')}
      <input type="hidden" name="form_build_id" value="HIDDEN-PLUMBING">
      <input type="hidden" name="lead_source" value="spring-fair" data-lead-capture>
      <input type="hidden" name="utm_content" value="banner-b">
      <input type="hidden" name="phone" value="+1 202 555 0147">
      <input name="_gotcha" value="">
      <button type="submit">Send</button></form>`,
    steps: [
      ['fill', '[name=email]', '{email}'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/all-plumbing',
    // Hidden inputs: the marked one, the campaign one and the lead field are sent; the rest is not.
    lead: {
      first_name: null,
      last_name: null,
      phone_raw: '+1 202 555 0147',
      custom_fields: { lead_source: 'spring-fair', utm_content: 'banner-b' },
    },
    sentKeys: ['email', 'phone_raw', 'lead_source', 'utm_content'],
    forbiddenValues: [...PLUMBING_NAMES.map((_, i) => `PLUMBING-${i}`), 'HIDDEN-PLUMBING'],
  },
  {
    fixture: 'login-show-password',
    steps: [
      ['fill', '#l-email', '{email}'],
      ['fill', '#l-password', 'hunter2-secret'],
      ['click', '#show'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/login-show-password',
    lead: null,
  },
  {
    fixture: 'identifier-first',
    steps: [
      ['fill', '#i-email', '{email}'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/identifier-first',
    lead: null,
  },
]

describe('tracker.js never sends secrets', () => {
  for (const testCase of CASES) {
    test(
      `${testCase.fixture}: ${testCase.lead ? 'the lead arrives without' : 'nothing is sent:'} card data, passwords, plumbing or URL secrets`,
      async () => {
        await runFormPage(harness, testCase)
      },
      TIMEOUT_MS,
    )
  }

  test(
    'a field that was ever a password stays out of a marked form; credential autocomplete keeps any form out',
    async () => {
      const { source, apiKey } = await createSource(harness.ctx, harness.organizationId, {
        spamFilter: false,
      })
      const variants = ['current-password', 'new-password', 'username', 'one-time-code', 'username webauthn']
      const url = harness.sitePage(
        '/credentials/page',
        apiKey,
        `<iframe name="sink" title="sink"></iframe>
         <form id="marked" data-lead-capture action="/done/cred-marked" method="post" target="sink">
           <input type="email" name="email"><input type="password" id="toggled" name="code">
           <input type="password" id="to-email" name="memo"><button>Send</button></form>
         ${variants
           .map(
             (token, i) =>
               `<form id="v${i}" data-lead-capture action="/done/cred-${i}" method="post" target="sink"><input type="email" name="email" autocomplete="${token}"><input name="extra"><button>Go</button></form>`,
           )
           .join('\n')}`,
        { forms: 'auto' },
      )
      const { page, sent } = await harness.newPage()
      await loaded(page, url)
      const email = uniqueEmail('credentials')
      for (let i = 0; i < variants.length; i++) {
        await page.fill(`#v${i} [name=email]`, email)
        await page.fill(`#v${i} [name=extra]`, 'extra')
        await page.click(`#v${i} button`)
      }
      // Password inputs turned into text and e-mail inputs by the page before the visitor types.
      await page.evaluate(() => {
        ;(document.getElementById('toggled') as HTMLInputElement).type = 'text'
        ;(document.getElementById('to-email') as HTMLInputElement).type = 'email'
      })
      await page.fill('#marked [name=email]', email)
      await page.fill('#toggled', 'hunter2-secret')
      await page.fill('#to-email', 'second-secret@example.com')
      await page.click('#marked button')

      const [lead] = await eventually(async () => {
        const rows = await harness.leadsOf(source.id)
        return rows.length > 0 ? rows : undefined
      }, 'the lead of the marked form')
      expect(lead).toMatchObject({ email, custom_fields: {} })
      await eventually(
        async () =>
          variants.every((_, i) => harness.pageSubmissions.some((entry) => entry.path === `/done/cred-${i}`))
            ? true
            : undefined,
        "the credential forms' own submissions",
      )
      await Bun.sleep(1000)
      expect(sent).toHaveLength(1)
      expect(Object.keys(JSON.parse(sent[0]!)).sort()).toEqual([
        '_elapsed_ms',
        'attribution',
        'email',
        'page_url',
      ])
      expect(
        forbiddenIn(sent[0]!, ['hunter2-secret', 'second-secret@example.com'], ['code', 'memo']),
      ).toEqual([])
      expect(await harness.leadsOf(source.id)).toHaveLength(1)
    },
    TIMEOUT_MS,
  )

  test(
    'page_url, landing pages and referrers keep only campaign parameters: no query secrets, fragments or credentials, also in touches stored by an older tracker',
    async () => {
      const { source, apiKey } = await createSource(harness.ctx, harness.organizationId, {
        spamFilter: false,
      })
      const url = harness.sitePage('/urls/page', apiKey, '<p>Manual submission only.</p>')
      const sitePort = new URL(harness.siteBase).port
      // An identity provider's callback on another host sends the visitor on with its full URL.
      harness.pages.set(
        '/idp/callback',
        `<meta name="referrer" content="unsafe-url"><a id="continue" href="${url}?utm_source=partner&session=SESSION-SECRET-3">Continue</a>`,
      )
      const older = {
        first_touch: {
          utm_source: 'old',
          landing_page: `${url}?utm_source=old&reset_token=OLD-RESET-SECRET-4#access_token=OLD-ACCESS-SECRET-5`,
          referrer: 'https://user:OLD-PASSWORD-SECRET-6@idp.example/cb?code=OLD-CODE-SECRET-7',
          at: '2026-01-01T00:00:00.000Z',
        },
      }
      const { page, sent } = await harness.newPage(
        `if (!localStorage.getItem('lead_capture_attribution')) localStorage.setItem('lead_capture_attribution', ${JSON.stringify(JSON.stringify(older))})`,
      )
      await page.goto(
        `http://localhost:${sitePort}/idp/callback?code=OAUTH-CODE-SECRET-8&state=s1#id_token=ID-TOKEN-SECRET-9`,
      )
      await page.click('#continue')
      await page.waitForFunction(() => 'LeadCapture' in window)
      // The precondition that makes this test able to fail: the browser does expose the secret.
      expect(await page.evaluate(() => document.referrer)).toContain('OAUTH-CODE-SECRET-8')

      const email = uniqueEmail('urls')
      await page.evaluate(
        (address) =>
          (
            window as unknown as { LeadCapture: { submit(data: object): Promise<unknown> } }
          ).LeadCapture.submit({
            email: address,
          }),
        email,
      )
      const [lead] = await harness.leadsOf(source.id)
      expect(lead!.email).toBe(email)
      expect(lead!.attribution).toEqual({
        first_touch: {
          utm_source: 'old',
          landing_page: `${url}?utm_source=old`,
          referrer: 'https://idp.example/cb',
          at: '2026-01-01T00:00:00.000Z',
        },
        last_touch: {
          utm_source: 'partner',
          referrer: `http://localhost:${sitePort}/idp/callback`,
          landing_page: `${url}?utm_source=partner`,
          at: expect.any(String),
        },
        page_url: `${url}?utm_source=partner`,
      })
      expect(sent).toHaveLength(1)
      const secrets = [
        'SESSION-SECRET-3',
        'OLD-RESET-SECRET-4',
        'OLD-ACCESS-SECRET-5',
        'OLD-PASSWORD-SECRET-6',
        'OLD-CODE-SECRET-7',
        'OAUTH-CODE-SECRET-8',
        'ID-TOKEN-SECRET-9',
      ]
      expect(forbiddenIn(sent[0]!, secrets, [])).toEqual([])
    },
    TIMEOUT_MS,
  )

  test(
    'a form where nothing is readable: nothing sent, a console warning names the form, the page submit goes on',
    async () => {
      const { source, apiKey } = await createSource(harness.ctx, harness.organizationId, {
        spamFilter: false,
      })
      const url = harness.sitePage('/unreadable/page', apiKey, await fixtureHtml('unreadable'), {
        forms: 'auto',
      })
      const { page, sent, console: lines } = await harness.newPage()
      await loaded(page, url)
      await page.fill('input', 'who knows')
      await Promise.all([page.waitForURL('**/done/unreadable'), page.click('button')])
      const warning = await eventually(
        async () => lines.find((line) => line.startsWith('warning: [LeadCapture] form mystery')),
        'the console warning',
      )
      expect(warning).toContain('nothing sent')
      expect(harness.pageSubmissions.some((entry) => entry.path === '/done/unreadable')).toBe(true)
      expect(sent).toEqual([])
      expect(await harness.leadsOf(source.id)).toEqual([])
    },
    TIMEOUT_MS,
  )

  test(
    'data-debug logs a spam outcome and its reasons (a newsletter submitted within 1.5 s)',
    async () => {
      const { source, apiKey } = await createSource(harness.ctx, harness.organizationId, { spamFilter: true })
      const url = harness.sitePage('/newsletter/page', apiKey, await fixtureHtml('newsletter'), {
        forms: 'auto',
        debug: true,
      })
      const { page, sent, console: lines } = await harness.newPage()
      await loaded(page, url)
      await page.fill('#n-email', uniqueEmail('fast'))
      await page.click('button')
      const reasons = await eventually(
        async () => lines.find((line) => line.startsWith('log: [LeadCapture] spam, reasons:')),
        'the spam reasons in the console',
      )
      expect(reasons).toMatch(/submitted_too_fast \(_elapsed_ms \d+\)/)
      expect(lines.some((line) => line.startsWith('log: [LeadCapture] sent 200'))).toBe(true)
      await eventually(
        async () =>
          harness.pageSubmissions.some((entry) => entry.path === '/done/newsletter') ? true : undefined,
        "the page's own fetch",
      )
      expect(sent).toHaveLength(1)
      expect(JSON.parse(sent[0]!)._elapsed_ms).toBeLessThan(1500)
      expect(await harness.leadsOf(source.id)).toEqual([])
    },
    TIMEOUT_MS,
  )
})
