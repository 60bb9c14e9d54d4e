/**
 * tracker.js: runs on customers' web pages (DESIGN §9). Bundled by Bun.build into one minified IIFE,
 * so nothing here leaks into the page's globals except `window.LeadCapture`. No dependencies, no
 * secrets: the only configuration is the attributes of its own <script> tag.
 *
 * It must never break the page: every storage access is guarded (Safari private mode and blocked
 * storage throw), the page's own submit is never prevented, and failures end in the console.
 */

import type { Attribution, Fields, LeadCaptureApi, Touch } from './types'

const win = window as Window & { LeadCapture?: LeadCaptureApi }
const doc = document
const nav = navigator as Navigator & { globalPrivacyControl?: boolean }
const PREFIX = '[LeadCapture]'
const STORAGE_KEY = 'lead_capture_attribution'
// Bounds the stored and sent values: the server caps attribution at 8 KB of JSON.
const MAX_VALUE = 500
const loadedAt = performance.now()

// An async script is still `currentScript` while it runs; the selector covers a copy-pasted tag
// that was moved into a module or injected by a tag manager.
const script = (doc.currentScript ||
  doc.querySelector('script[data-webhook-url]')) as HTMLScriptElement | null
const setting = (name: string) => (script ? script.getAttribute(`data-${name}`) : null)
const webhookUrl = setting('webhook-url')
const debugSetting = setting('debug')
const debug = debugSetting !== null && debugSetting !== 'false'
const autoForms = setting('forms') === 'auto'
const privacy = nav.doNotTrack === '1' || nav.globalPrivacyControl === true

const log = (...args: unknown[]) => {
  if (debug) console.log(PREFIX, ...args)
}
// Failures are shown even without data-debug: a refused lead must never vanish silently.
const warn = (...args: unknown[]) => console.warn(PREFIX, ...args)

/** Normalised spelling of a field name → lead field. Keys are lower-case with separators removed. */
const LEAD_FIELD_OF: Record<string, string> = {}
for (const [field, names] of [
  ['email', 'email mail emailaddress'],
  ['phone_raw', 'phone tel mobile telephone phoneraw phonenumber'],
  // `first` / `last`: WPForms' `[first]` / `[last]`, Gravity's sub-labels "First" / "Last".
  ['first_name', 'firstname fname givenname first'],
  ['last_name', 'lastname lname familyname surname last'],
  ['full_name', 'name fullname'],
  ['status', 'status'],
] as const) {
  for (const name of names.split(' ')) LEAD_FIELD_OF[name] = field
}
const isLeadField = (name: string) => Object.values(LEAD_FIELD_OF).includes(name)

// `lead[email]` → `email`, `your-email` (Contact Form 7) → `email`, `E-Mail *` → `email`.
const normalise = (name: string) =>
  name
    .toLowerCase()
    .replace(/^.*\[([^\]]+)\]$/, '$1')
    .replace(/[^a-z0-9]/g, '')
    .replace(/^your/, '')
const leadFieldOf = (hints: string[]) => hints.map((hint) => LEAD_FIELD_OF[normalise(hint)]).find(Boolean)

// Card data and passwords by name or label, whatever the input type says: `payment[cc_number]`,
// `cc-exp`, `pan`, `security_code`, `cardNumber`, "CVV". Checked on name tokens (camelCase split).
// `cc` prefixes are listed, not open-ended: a `ccpa_consent` box is not card data.
const CARD_TOKEN =
  /^(cc(num\w*|no|exp\w*|cvv|cvc|csc|v|type|name)?|cid|cvn|cvv2?|cvc2?|csc|pan|exp|expiry|expiration)$/
const secretName = (name: string) => {
  const tokens = name
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
  const joined = tokens.join('')
  return tokens.some((token) => CARD_TOKEN.test(token)) || /passw|pwd|card|securitycode|^pass$/.test(joined)
}
// Builder plumbing and anti-forgery tokens: never lead data. `_gotcha` / `_hp` are honeypots the
// server reads as spam signals; other `_` names are WordPress plumbing (`_wpnonce`, `_wpcf7…`).
const PLUMBING = /nonce|csrf|xsrf|token|captcha|turnstile|^hs_context$|^gform_|^_(?!gotcha$|hp$)/i
const CAMPAIGN = /^(utm_\w+|gclid|fbclid|msclkid)$/i
// Inputs that make a form a log-in or sign-up form, and fields never sent on any form. `username`
// counts as the first token only: WooCommerce's checkout e-mail is `email username` (a checkout that
// may create an account), an identifier-first log-in's is `username`.
const CREDENTIAL_AUTOCOMPLETE = /\b(current-password|new-password|one-time-code)\b|^username\b/
const SECRET_AUTOCOMPLETE = /cc-|password/
const SKIPPED_TYPES = /^(password|file|submit|button|reset|image|fieldset|output)$/
// Generated names that say nothing: Gravity `input_4`, Elementor `field_9e8d7c6`, WPForms `[2]`,
// Webflow `field` / `Field-2`.
const MACHINE_NAME = /^(input|field|item)?[-_]?([0-9a-f]*\d[0-9a-f._]*)?$/i

/**
 * A value that holds a Luhn-valid 13–19 digit number (a payment card), spaces and dashes allowed,
 * outside e-mail addresses (`4111…@example.com` is an address, which the server keeps too; a card
 * number glued to one is still redacted there). Addresses are set aside word by word, each word
 * tested from its start: a pattern searching the whole value for `…@…` backtracked over every long
 * word without one (~300 ms for a 20 KB word, seconds for a pasted blob, on the visitor's submit).
 */
const holdsCard = (value: unknown) =>
  (
    String(value)
      .split(/(\s+)/)
      .map((word) => (/^[^@]+@[^@.]+(\.[^@.]+)+\.?$/.test(word) ? '' : word))
      .join('')
      .match(/\d[\d -]{11,}\d/g) || []
  ).some((run) => {
    const digits = run.replace(/\D/g, '')
    let sum = 0
    for (let i = 0; i < digits.length; i++) {
      const digit = +digits[digits.length - 1 - i]! * (i % 2 ? 2 : 1)
      sum += digit > 9 ? digit - 9 : digit
    }
    return digits.length > 12 && digits.length < 20 && sum % 10 === 0
  })

// Custom field names the server accepts are `A-Za-z0-9_.-`; anything else would refuse the lead.
const safeName = (name: string) =>
  name
    .replace(/[^\w.-]+/g, '_')
    .replace(/_+$/, '')
    .slice(0, 100)
// Label text as a field name: "Your budget (€) *" → `your_budget`.
const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '')
    .slice(0, 40)

/** [custom name, value, hints that may name a lead field (name, label, autocomplete, type…)] */
type Entry = [string, unknown, string[]?]

/**
 * Turns entries into the inbound body: entries whose hints name a lead field become it (the first to
 * claim a lead field wins; later ones keep their own name), secrets are dropped, everything else
 * passes through under its own name for the source's field mapping.
 */
function toLead(entries: Entry[]): Fields {
  const lead: Fields = {}
  for (const [name, value, hints = [name]] of entries) {
    if (value === '' || value == null || [name, ...hints].some(secretName)) continue
    let key = leadFieldOf(hints) || ''
    if (!key || key in lead) key = safeName(name)
    // A card number typed anywhere but the phone field (which may hold 13–15 digits of its own).
    if (!key || (key !== 'phone_raw' && holdsCard(value))) continue
    if (key in lead) {
      // Lead fields are single strings; repeated custom fields (checkbox groups) become lists.
      if (!isLeadField(key)) lead[key] = ([] as unknown[]).concat(lead[key], value)
    } else lead[key] = value
  }
  const fullName = lead.full_name
  if (typeof fullName === 'string') {
    const [first, ...rest] = fullName.trim().split(/\s+/)
    if (!lead.first_name) lead.first_name = first
    if (rest.length && !lead.last_name) lead.last_name = rest.join(' ')
    delete lead.full_name
  }
  return lead
}

// Every element that was ever a password input: a "show password" toggle makes it type=text, and it
// must stay a secret (and its form a log-in form) after that.
const everPassword = new WeakSet<Element>()
for (const input of doc.querySelectorAll('input[type=password]')) everPassword.add(input)
// Inputs added later are caught at submit by their type, or here when their type changes.
new MutationObserver((records) => {
  for (const record of records) {
    if (/^password$/i.test(record.oldValue || '')) everPassword.add(record.target as Element)
  }
}).observe(doc, { subtree: true, attributeFilter: ['type'], attributeOldValue: true })

type Field = HTMLInputElement & { labels: NodeListOf<HTMLLabelElement> | null }
const fieldsOf = (form: HTMLFormElement) => Array.from(form.elements) as Field[]

/** The text of the field's `<label for>` or wrapping `<label>` (without option texts), or aria-label. */
function labelOf(element: Field): string {
  const label = element.labels?.[0]
  if (!label) return element.getAttribute('aria-label') || ''
  const copy = label.cloneNode(true) as Element
  for (const inner of copy.querySelectorAll('select,textarea')) inner.remove()
  return copy.textContent || ''
}

function formEntries(form: HTMLFormElement): Entry[] {
  const entries: Entry[] = []
  for (const element of fieldsOf(form)) {
    const { type } = element
    const autocomplete = (element.getAttribute('autocomplete') || '').toLowerCase()
    // Builder wrappers: Elementor `form_fields[budget]` → `budget`, WPForms `wpforms[fields][0][first]`.
    const name = element.name.replace(/^(form_fields|wpforms\[fields\])\[([^\]]*)\]/, '$2')
    // Gravity Forms' name field: `input_1.3` is the first name, `input_1.6` the last name.
    const own = name
      .match(/([^[\]]*)\]?$/)![1]!
      .replace(/^input_\d+\.([36])$/, (_, part) => (part === '3' ? 'first' : 'last'))
    if (
      element.disabled ||
      everPassword.has(element) ||
      SKIPPED_TYPES.test(type) ||
      SECRET_AUTOCOMPLETE.test(autocomplete) ||
      PLUMBING.test(element.name) ||
      element.hasAttribute('data-lead-capture-ignore') ||
      ((type === 'checkbox' || type === 'radio') && !element.checked) ||
      // Hidden inputs are builder plumbing unless the site marked them, or they hold campaign
      // parameters or a lead field (a multi-step form's e-mail).
      (type === 'hidden' &&
        !element.hasAttribute('data-lead-capture') &&
        !CAMPAIGN.test(own) &&
        !LEAD_FIELD_OF[normalise(own)])
    ) {
      continue
    }
    const value =
      type === 'select-multiple'
        ? Array.from((element as unknown as HTMLSelectElement).selectedOptions, (option) => option.value)
        : element.value
    const label = labelOf(element)
    const token = autocomplete
      .split(' ')
      .pop()!
      .replace(/^(on|off)$/, '')
    const named = !MACHINE_NAME.test(own) && own
    // A generated or missing name is replaced by what the visitor read: label, placeholder,
    // autocomplete token; an `email` / `tel` type still names the lead field.
    const custom = named ? name : slug(label) || slug(element.placeholder || '') || token
    entries.push([custom, value, [named || '', label, token, element.placeholder || '', type]])
  }
  return entries
}

const clip = (value: string) => value.slice(0, MAX_VALUE)

/**
 * A URL as the tracker keeps or sends it: no fragment (`#access_token=…`), no credentials, and of the
 * query only campaign parameters (a password-reset or OAuth `?token=`/`?code=` is never sent); with
 * DNT/GPC no query at all.
 */
const cleanUrl = (href: string) => {
  try {
    const url = new URL(href)
    const kept = new URLSearchParams()
    url.searchParams.forEach((value, name) => {
      if (!privacy && CAMPAIGN.test(name)) kept.append(name, value)
    })
    url.search = `${kept}`
    url.hash = url.username = url.password = ''
    return clip(url.href)
  } catch {
    return ''
  }
}

/** This page view as a touch: campaign parameters, an external referrer, the landing page. */
function currentTouch(): [Touch, boolean] {
  const touch: Touch = {}
  let fresh = false
  new URLSearchParams(location.search).forEach((value, name) => {
    const key = name.toLowerCase()
    if (value && CAMPAIGN.test(key)) {
      touch[key] = clip(value)
      fresh = true
    }
  })
  try {
    if (doc.referrer && new URL(doc.referrer).host !== location.host) {
      touch.referrer = cleanUrl(doc.referrer)
      fresh = true
    }
  } catch {}
  touch.landing_page = cleanUrl(location.href)
  touch.at = new Date().toISOString()
  return [touch, fresh]
}

/**
 * First touch stays; last touch moves on every campaign or external-referrer visit (internal
 * navigation and direct revisits keep it). With DNT/GPC nothing is read, stored or sent.
 */
let attribution: Attribution = {}
if (!privacy) {
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) || '{}')
    if (stored && typeof stored === 'object') attribution = stored
    // Touches stored by an older tracker may hold whole URLs: cleaned before they can be sent.
    for (const touch of [attribution.first_touch, attribution.last_touch]) {
      for (const key of ['landing_page', 'referrer']) if (touch?.[key]) touch[key] = cleanUrl(touch[key])
    }
  } catch {}
  const [touch, fresh] = currentTouch()
  if (fresh || !attribution.first_touch) {
    attribution = { first_touch: attribution.first_touch || touch, last_touch: touch }
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(attribution))
    } catch {}
  }
}

/** Resolves with the response body (errors included); rejects only when nothing could be sent. */
function send(lead: Fields): Promise<unknown> {
  if (!webhookUrl) {
    const missing = 'no data-webhook-url on the script tag: nothing sent'
    warn(missing)
    return Promise.reject(new Error(`${PREFIX} ${missing}`))
  }
  const payload: Fields = {
    ...lead,
    _elapsed_ms: Math.round(performance.now() - loadedAt),
    page_url: cleanUrl(location.href),
  }
  if (!privacy) payload.attribution = attribution
  const body = JSON.stringify(payload)
  log('sending', payload)
  return fetch(webhookUrl, {
    method: 'POST',
    // keepalive lets the request outlive the navigation of the page's own submit; browsers cap
    // keepalive bodies at 64 KiB, so a (rare) huge form is sent without it rather than not at all.
    keepalive: body.length < 20_000,
    headers: { 'Content-Type': 'application/json' },
    body,
  }).then(
    async (response) => {
      const result = (await response.json().catch(() => null)) as Fields | null
      if (response.ok && result && result.success !== false) {
        log('sent', response.status, result)
        // The server does not say why a lead is spam (that would teach bots); these are the
        // reasons visible from what was sent, for whoever debugs the page.
        if (result.status === 'spam') {
          log(
            'spam, reasons:',
            (
              (result.reasons as string[]) || [
                (payload._elapsed_ms as number) < 1500 &&
                  `submitted_too_fast (_elapsed_ms ${payload._elapsed_ms})`,
                (payload._gotcha || payload._hp) && 'honeypot_filled',
              ]
            )
              .filter(Boolean)
              .join(', '),
          )
        }
      } else warn('submission failed:', response.status, result)
      return result
    },
    (error) => {
      // A CORS refusal (domain allow list) or a network failure: the browser gives no status.
      warn('submission failed:', String(error), '(network error, or the origin is not allowed)')
      throw error
    },
  )
}

function wanted(form: HTMLFormElement): boolean {
  const marker = form.getAttribute('data-lead-capture')
  const fields = fieldsOf(form)
  // Log-in and sign-up forms are never leads, marked or not, when a filled field's autocomplete
  // says credentials (an identifier-first log-in has only `username`). Empty ones do not count:
  // honeypots (Gravity Forms') carry `autocomplete="new-password"` to keep browsers from filling them.
  if (
    marker === 'off' ||
    fields.some(
      (field) => field.value && CREDENTIAL_AUTOCOMPLETE.test(field.getAttribute('autocomplete') || ''),
    )
  ) {
    return false
  }
  // Auto mode also leaves alone a form with a field that is or ever was a password; a marked form
  // is sent without it.
  return (
    marker !== null ||
    (autoForms &&
      !!form.querySelector('input[type=email],input[type=tel]') &&
      !fields.some((field) => everPassword.has(field) || field.type === 'password'))
  )
}

if (!win.LeadCapture) {
  win.LeadCapture = {
    submit: (data) => send(toLead(Object.entries(data || {}))),
    attribution: () => attribution,
  }
  // Capture phase: runs before the page's own handlers, so a handler that stops propagation or
  // submits by XHR cannot hide the form. Never preventDefault: the page's submit goes on as is.
  doc.addEventListener(
    'submit',
    (event) => {
      const form = event.target
      if (form instanceof HTMLFormElement && wanted(form)) {
        const lead = toLead(formEntries(form))
        if (Object.keys(lead).length > 0) send(lead).catch(() => {})
        else warn('form', form.id || form.action, 'has no readable field: nothing sent')
      }
    },
    true,
  )
  log('ready', { webhookUrl, autoForms, privacy, attribution })
} else log('already loaded: this copy does nothing')
