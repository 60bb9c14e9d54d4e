import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { asc, eq } from 'drizzle-orm'
import type { Page } from 'playwright-core'
import type { AppContext } from '../../src/context'
import { deliveryLogs, leads } from '../../src/db/schema'
import { uniqueEmail } from '../helpers/emails'
import { createSource } from '../helpers/factories'
import {
  type BrowserHarness,
  eventually,
  forbiddenIn,
  loaded,
  SETUP_TIMEOUT_MS,
  startBrowserHarness,
  TIMEOUT_MS,
} from './support'

/** tracker.js in a real headless Chromium against the real HTTP server (harness: ./support.ts). */

type LeadCaptureWindow = Window & {
  LeadCapture: { submit(data: Record<string, unknown>): Promise<Record<string, unknown> | null> }
}

let harness: BrowserHarness
let ctx: AppContext
let apiBase: string
let siteBase: string
let organizationId: string
let pages: BrowserHarness['pages']
let pageSubmissions: BrowserHarness['pageSubmissions']
let sitePage: BrowserHarness['sitePage']
let newPage: BrowserHarness['newPage']

beforeAll(async () => {
  harness = await startBrowserHarness()
  ;({ ctx, apiBase, siteBase, organizationId, pages, pageSubmissions, sitePage, newPage } = harness)
}, SETUP_TIMEOUT_MS)

afterEach(() => harness.closeContexts())

afterAll(() => harness?.stop())

const leadsOf = (sourceId: string) => ctx.db.select().from(leads).where(eq(leads.sourceId, sourceId))
const logsOf = (sourceId: string) =>
  ctx.db.select().from(deliveryLogs).where(eq(deliveryLogs.sourceId, sourceId)).orderBy(asc(deliveryLogs.id))

const storedAttribution = (page: Page) =>
  page.evaluate(() => JSON.parse(localStorage.getItem('lead_capture_attribution') ?? 'null'))

/** Values typed into fields the tracker must never send (checked with forbiddenIn). */
const FORBIDDEN = {
  password: 'hunter2-secret',
  cardNumber: '4242424242424242',
  cvv: '987',
} as const

const LEAD_FORM = `
  <form id="lead" data-lead-capture action="/thanks" method="post">
    <input name="name">
    <input type="email" name="E-Mail">
    <input type="tel" name="mobile">
    <input name="company">
    <input name="budget">
    <input type="password" name="password">
    <input name="card_number" autocomplete="cc-number">
    <input name="cvv">
    <input type="hidden" name="plan" value="pro" data-lead-capture>
    <button type="submit">Send</button>
  </form>`

describe('tracker.js in Chromium', () => {
  test(
    'a marked form becomes a lead with mapped fields and first/last touch; the page submit goes on; no secrets sent',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, {
        spamFilter: false,
        fieldMapping: { budget: 'custom.budget_eur' },
      })
      const landing = sitePage('/form/landing', apiKey, LEAD_FORM)
      const { page, sent } = await newPage()

      await loaded(page, `${landing}?utm_source=newsletter&utm_medium=email&utm_campaign=spring&gclid=g-123`)
      const first = await storedAttribution(page)
      expect(first.first_touch).toMatchObject({
        utm_source: 'newsletter',
        utm_campaign: 'spring',
        gclid: 'g-123',
      })
      expect(first.last_touch).toEqual(first.first_touch)

      // A later campaign visit moves the last touch; a direct revisit keeps it.
      await loaded(page, `${landing}?utm_source=google&utm_medium=cpc&utm_campaign=brand&msclkid=m-9`)
      await loaded(page, landing)
      const attribution = await storedAttribution(page)
      expect(attribution.first_touch).toEqual(first.first_touch)
      expect(attribution.last_touch).toMatchObject({
        utm_source: 'google',
        utm_medium: 'cpc',
        msclkid: 'm-9',
      })
      expect(attribution.last_touch.landing_page).toContain('utm_campaign=brand')

      const email = uniqueEmail('ada')
      await page.fill('[name=name]', 'Ada King Lovelace')
      await page.fill('[name=E-Mail]', email)
      await page.fill('[name=mobile]', '+44 20 7946 0958')
      await page.fill('[name=company]', 'Analytical Engines')
      await page.fill('[name=budget]', '5000')
      await page.fill('[name=password]', FORBIDDEN.password)
      await page.fill('[name=card_number]', FORBIDDEN.cardNumber)
      await page.fill('[name=cvv]', FORBIDDEN.cvv)
      await Promise.all([page.waitForURL('**/thanks'), page.click('button[type=submit]')])

      // The page's own submit happened, untouched, with every field (the password included).
      expect(pageSubmissions.find((entry) => entry.fields['E-Mail'] === email)).toEqual({
        path: '/thanks',
        fields: expect.objectContaining({
          name: 'Ada King Lovelace',
          password: FORBIDDEN.password,
          cvv: FORBIDDEN.cvv,
        }),
      })

      // keepalive: the lead arrives although the page navigated away.
      const [lead] = await eventually(async () => {
        const rows = await leadsOf(source.id)
        return rows.length > 0 ? rows : undefined
      }, 'the lead')
      expect(lead).toMatchObject({
        firstName: 'Ada',
        lastName: 'King Lovelace',
        email,
        phoneRaw: '+44 20 7946 0958',
        phoneE164: '+442079460958',
        customFields: { company: 'Analytical Engines', plan: 'pro', budget_eur: '5000' },
      })
      expect(lead!.attribution).toMatchObject({
        first_touch: {
          utm_source: 'newsletter',
          utm_medium: 'email',
          utm_campaign: 'spring',
          gclid: 'g-123',
        },
        last_touch: { utm_source: 'google', utm_medium: 'cpc', utm_campaign: 'brand', msclkid: 'm-9' },
        page_url: landing,
      })

      // What the server received: no password, no card data, and the elapsed time.
      const [log] = await logsOf(source.id)
      expect(log).toMatchObject({ httpStatus: 200, outcome: 'created', leadId: lead!.id })
      const body = JSON.parse(log!.body!)
      expect(Object.keys(body).sort()).toEqual(
        [
          '_elapsed_ms',
          'attribution',
          'budget',
          'company',
          'email',
          'first_name',
          'last_name',
          'page_url',
          'phone_raw',
          'plan',
        ].sort(),
      )
      expect(body._elapsed_ms).toBeGreaterThan(0)
      expect(sent).toHaveLength(1)
      for (const text of [log!.body!, ...sent]) {
        expect(forbiddenIn(text, Object.values(FORBIDDEN), ['password', 'card_number', 'cvv'])).toEqual([])
      }
    },
    TIMEOUT_MS,
  )

  test(
    'LeadCapture.submit() resolves with the response body: spam when too fast, then created, then updated',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, { spamFilter: true })
      const url = sitePage('/manual/page', apiKey, '<p>No form here.</p>')
      const { page } = await newPage()
      await loaded(page, `${url}?utm_source=partner`)
      const email = uniqueEmail('grace')
      const submit = (data: Record<string, unknown>) =>
        page.evaluate((lead) => (window as unknown as LeadCaptureWindow).LeadCapture.submit(lead), data)

      // Within 1.5 s of the script loading: a bot's speed, flagged by the server from `_elapsed_ms`.
      expect(await submit({ email })).toEqual({ status: 'spam', success: true })
      expect(await leadsOf(source.id)).toHaveLength(0)

      await Bun.sleep(1600)
      const created = await submit({
        full_name: 'Grace Brewster Hopper',
        email,
        phone: '+1 212 555 0100',
        interest: 'demo',
      })
      expect(created).toEqual({ status: 'created', success: true, lead_id: expect.any(String) })
      const [lead] = await leadsOf(source.id)
      expect(lead).toMatchObject({
        id: created!.lead_id as string,
        firstName: 'Grace',
        lastName: 'Brewster Hopper',
        email,
        phoneRaw: '+1 212 555 0100',
        customFields: { interest: 'demo' },
      })
      expect(lead!.attribution).toMatchObject({ first_touch: { utm_source: 'partner' } })

      const updated = await submit({ email, status: 'qualified', password: 'never-sent' })
      expect(updated).toEqual({ status: 'updated', success: true, lead_id: created!.lead_id })
      const logs = await logsOf(source.id)
      expect(logs.map((log) => log.outcome)).toEqual(['spam', 'created', 'updated'])
      expect(forbiddenIn(logs[2]!.body!, ['never-sent'], ['password'])).toEqual([])
    },
    TIMEOUT_MS,
  )

  for (const [signal, initScript] of [
    ['Do Not Track', `Object.defineProperty(Navigator.prototype, 'doNotTrack', { get: () => '1' })`],
    [
      'Global Privacy Control',
      `Object.defineProperty(Navigator.prototype, 'globalPrivacyControl', { get: () => true })`,
    ],
  ] as const) {
    test(
      `${signal}: nothing in localStorage and no attribution sent; the lead still arrives`,
      async () => {
        const { source, apiKey } = await createSource(ctx, organizationId, { spamFilter: false })
        const url = sitePage(
          `/privacy/${signal.replaceAll(' ', '-')}`,
          apiKey,
          LEAD_FORM.replace('action="/thanks"', 'action="/thanks-private"'),
        )
        const { page } = await newPage(initScript)
        await loaded(page, `${url}?utm_source=newsletter&gclid=g-1`)
        expect(await page.evaluate(() => localStorage.length)).toBe(0)

        const email = uniqueEmail('private')
        await page.fill('[name=E-Mail]', email)
        await Promise.all([page.waitForURL('**/thanks-private'), page.click('button[type=submit]')])
        const [lead] = await eventually(async () => {
          const rows = await leadsOf(source.id)
          return rows.length > 0 ? rows : undefined
        }, 'the lead')
        expect(lead!.email).toBe(email)
        // No query at all under DNT/GPC, not even campaign parameters.
        expect(lead!.attribution).toEqual({ page_url: url })
        const [log] = await logsOf(source.id)
        expect(JSON.parse(log!.body!)).not.toHaveProperty('attribution')
        expect(await page.evaluate(() => localStorage.length)).toBe(0)
      },
      TIMEOUT_MS,
    )
  }

  test(
    'an origin outside the domain allow list: the submission fails visibly in the debug log, no lead',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, {
        spamFilter: false,
        domainAllowlist: ['www.allowed.example'],
      })
      // The form posts into an iframe, so the page stays and its console can be read.
      const url = sitePage(
        '/refused/page',
        apiKey,
        '<iframe name="sink"></iframe><form data-lead-capture action="/thanks-refused" method="post" target="sink"><input type="email" name="email"><button>Send</button></form>',
        { debug: true },
      )
      const { page, console: lines } = await newPage()
      await loaded(page, url)
      expect(lines.some((line) => line.startsWith('log: [LeadCapture] ready'))).toBe(true)

      await page.fill('[name=email]', uniqueEmail('refused'))
      await page.click('button')
      const failure = await eventually(
        async () => lines.find((line) => line.startsWith('warning: [LeadCapture] submission failed')),
        'the failure in the console',
      )
      expect(failure).toContain('not allowed')
      expect(lines.some((line) => line.startsWith('log: [LeadCapture] sending'))).toBe(true)
      await eventually(
        async () => (pageSubmissions.some((entry) => entry.path === '/thanks-refused') ? true : undefined),
        "the page's own submit",
      )

      const outcome = await page.evaluate(() =>
        (window as unknown as LeadCaptureWindow).LeadCapture.submit({ email: 'by-hand@example.com' }).then(
          () => 'resolved',
          (error: unknown) => `rejected: ${error}`,
        ),
      )
      expect(outcome).toStartWith('rejected: TypeError')
      expect(await leadsOf(source.id)).toHaveLength(0)
      // The server saw the refused preflights, so the source's owner can see them too.
      const logs = await logsOf(source.id)
      expect(logs.length).toBeGreaterThanOrEqual(1)
      expect(logs.every((log) => log.httpStatus === 403 && log.reason === 'domain_not_allowed')).toBe(true)
    },
    TIMEOUT_MS,
  )

  test(
    'a 403 the script can read (IP allow list) is logged with its status and body, and submit() resolves with it',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, {
        spamFilter: false,
        ipAllowlist: ['10.0.0.0/8'],
      })
      const url = sitePage('/ip-refused/page', apiKey, '<p>Manual only.</p>')
      const { page, console: lines } = await newPage()
      await loaded(page, url)
      const result = await page.evaluate(() =>
        (window as unknown as LeadCaptureWindow).LeadCapture.submit({ email: 'ip@example.com' }),
      )
      expect(result).toMatchObject({ error: 'ip_not_allowed', message: expect.any(String) })
      const failure = await eventually(
        async () => lines.find((line) => line.startsWith('warning: [LeadCapture] submission failed')),
        'the failure in the console',
      )
      expect(failure).toContain('403')
      expect(await leadsOf(source.id)).toHaveLength(0)
    },
    TIMEOUT_MS,
  )

  test(
    'data-forms="auto": forms with an e-mail or tel input are captured, log-in forms and opted-out forms are not',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, { spamFilter: false })
      const url = sitePage(
        '/auto/page',
        apiKey,
        `<iframe name="sink"></iframe>
       <form id="login" action="/login" method="post" target="sink"><input type="email" name="email"><input type="password" name="pw"><button>Log in</button></form>
       <form id="optout" data-lead-capture="off" action="/optout" method="post" target="sink"><input type="email" name="email"><button>Send</button></form>
       <form id="search" action="/search" method="post" target="sink"><input name="q"><button>Search</button></form>
       <form id="contact" action="/contact" method="post" target="sink"><input type="tel" name="contact_number" autocomplete="off"><input name="lead[first_name]"><input type="checkbox" name="topics" value="a" checked><input type="checkbox" name="topics" value="b" checked><button>Call me</button></form>`,
        { forms: 'auto' },
      )
      const { page, sent } = await newPage()
      await loaded(page, url)
      await page.fill('#login [name=email]', 'login@example.com')
      await page.fill('#login [name=pw]', 'secret-password')
      await page.click('#login button')
      await page.fill('#optout [name=email]', 'optout@example.com')
      await page.click('#optout button')
      await page.fill('#search [name=q]', 'pricing')
      await page.click('#search button')
      await page.fill('#contact [name=contact_number]', '+1 212 555 0199')
      await page.fill('#contact [name="lead[first_name]"]', 'Katherine')
      await page.click('#contact button')

      const [lead] = await eventually(async () => {
        const rows = await leadsOf(source.id)
        return rows.length > 0 ? rows : undefined
      }, 'the lead')
      expect(lead).toMatchObject({
        firstName: 'Katherine',
        phoneRaw: '+1 212 555 0199',
        customFields: { topics: ['a', 'b'] },
      })
      await eventually(
        async () => (pageSubmissions.some((entry) => entry.path === '/contact') ? true : undefined),
        'the page submits',
      )
      expect(sent).toHaveLength(1)
      expect(await logsOf(source.id)).toHaveLength(1)
    },
    TIMEOUT_MS,
  )

  test(
    'examples/tracker.html works as shipped once its base URL and key are filled in',
    async () => {
      const { source, apiKey } = await createSource(ctx, organizationId, { spamFilter: true })
      const example = await Bun.file(new URL('../../examples/tracker.html', import.meta.url)).text()
      expect(example).toContain(
        'data-webhook-url="http://localhost:3000/api/webhook/lead/flwh_REPLACE_WITH_YOUR_KEY"',
      )
      pages.set(
        '/example/contact',
        example.replaceAll('http://localhost:3000', apiBase).replaceAll('flwh_REPLACE_WITH_YOUR_KEY', apiKey),
      )
      const { page, console: lines } = await newPage()
      await loaded(page, `${siteBase}/example/contact?utm_source=example`)
      // A person takes longer than the 1.5 s the spam filter allows a bot.
      await Bun.sleep(1600)

      await page.fill('#callback-phone', '+1 212 555 0123')
      await page.click('#callback')
      const answer = await page
        .waitForFunction(() => document.getElementById('callback-result')?.dataset.answer)
        .then((handle) => handle.jsonValue())
        .then((text) => JSON.parse(String(text)))
      expect(answer).toEqual({ status: 'created', success: true, lead_id: expect.any(String) })

      const email = uniqueEmail('example')
      await page.fill('#sales [name=name]', 'Mary Jackson')
      await page.fill('#sales [name=email]', email)
      await page.fill('#sales [name=company]', 'NACA')
      await page.fill('#sales [name=coupon]', 'SECRET-COUPON')
      await Promise.all([page.waitForURL('**/thank-you'), page.click('#sales button[type=submit]')])
      const lead = await eventually(
        async () => (await leadsOf(source.id)).find((row) => row.email === email),
        'the lead',
      )
      expect(lead).toMatchObject({
        firstName: 'Mary',
        lastName: 'Jackson',
        customFields: { company: 'NACA', interest: 'demo' },
        attribution: expect.objectContaining({
          first_touch: expect.objectContaining({ utm_source: 'example' }),
        }),
      })
      const logs = await logsOf(source.id)
      expect(logs.map((log) => log.outcome)).toEqual(['created', 'created'])
      expect(forbiddenIn(logs[1]!.body!, ['SECRET-COUPON'], ['coupon'])).toEqual([])
      expect(lines.some((line) => line.startsWith('log: [LeadCapture] sent 200'))).toBe(true)
    },
    TIMEOUT_MS,
  )

  test(
    'tracker.js reaches the page from the API origin with its cache and CORS headers',
    async () => {
      const { apiKey } = await createSource(ctx, organizationId)
      const url = sitePage('/headers/page', apiKey, '<p>Hello</p>')
      const { page } = await newPage()
      const scriptResponse = page.waitForResponse((response) =>
        response.url().endsWith('/api/webhook/tracker.js'),
      )
      await loaded(page, url)
      const response = await scriptResponse
      expect(response.status()).toBe(200)
      const headers = response.headers()
      expect(headers['content-type']).toBe('application/javascript; charset=utf-8')
      expect(headers['content-encoding']).toBe('gzip')
      expect(headers['cache-control']).toBe('public, max-age=3600')
      expect(headers['access-control-allow-origin']).toBe('*')
      expect(headers.etag).toMatch(/^".+-gzip"$/)
    },
    TIMEOUT_MS,
  )
})
