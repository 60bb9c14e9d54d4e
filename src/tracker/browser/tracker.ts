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
  ['email', 'email mail'],
  ['phone_raw', 'phone tel mobile telephone phoneraw'],
  ['first_name', 'firstname fname givenname'],
  ['last_name', 'lastname lname familyname surname'],
  ['full_name', 'name fullname'],
  ['status', 'status'],
] as const) {
  for (const name of names.split(' ')) LEAD_FIELD_OF[name] = field
}
const isLeadField = (name: string) => Object.values(LEAD_FIELD_OF).includes(name)

// `lead[email]` → `email`, `your-email` (Contact Form 7) → `email`, `E-Mail` → `email`.
const normalise = (name: string) =>
  name
    .toLowerCase()
    .replace(/^.*\[([^\]]+)\]$/, '$1')
    .replace(/[^a-z0-9]/g, '')
    .replace(/^your/, '')

// Secrets by name, whatever the input type says (a "show password" toggle turns it into text).
const SECRET_NAME = /passw|^pass$|pwd|card|cvv|cvc|csc|^cc([-_]|num|exp|$)|[-_]cc$/i
const SECRET_AUTOCOMPLETE = /^cc-|password/
const SKIPPED_TYPES = /^(password|file|submit|button|reset|image|fieldset|output)$/

// Custom field names the server accepts are `A-Za-z0-9_.-`; anything else would refuse the lead.
const safeName = (name: string) =>
  name
    .replace(/[^\w.-]+/g, '_')
    .replace(/_+$/, '')
    .slice(0, 100)

/**
 * Turns [name, value, hint] entries into the inbound body: common names become lead fields (the
 * first field to claim a lead field wins; later ones keep their own name), secrets are dropped,
 * everything else passes through under its own name for the source's field mapping.
 */
function toLead(entries: Array<[string, unknown, string?]>): Fields {
  const lead: Fields = {}
  for (const [name, value, hint] of entries) {
    if (SECRET_NAME.test(name) || value === '' || value == null) continue
    let key = LEAD_FIELD_OF[normalise(name)] || (hint && LEAD_FIELD_OF[normalise(hint)]) || ''
    if (!key || key in lead) key = safeName(name)
    if (!key) continue
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

function formEntries(form: HTMLFormElement): Array<[string, unknown, string?]> {
  const entries: Array<[string, unknown, string?]> = []
  for (const element of Array.from(form.elements) as HTMLInputElement[]) {
    const { name, type } = element
    const autocomplete = element.getAttribute('autocomplete') || ''
    if (
      !name ||
      element.disabled ||
      SKIPPED_TYPES.test(type) ||
      SECRET_AUTOCOMPLETE.test(autocomplete) ||
      element.hasAttribute('data-lead-capture-ignore') ||
      ((type === 'checkbox' || type === 'radio') && !element.checked)
    ) {
      continue
    }
    const value =
      type === 'select-multiple'
        ? Array.from((element as unknown as HTMLSelectElement).selectedOptions, (option) => option.value)
        : element.value
    // The autocomplete token (`given-name`, `tel`) or the input type names the field when its name
    // does not: `<input type="email" name="contact" autocomplete="off">` is still the e-mail.
    const token = autocomplete.split(' ').pop() || ''
    entries.push([name, value, LEAD_FIELD_OF[normalise(token)] ? token : type])
  }
  return entries
}

const clip = (value: string) => value.slice(0, MAX_VALUE)

/** This page view as a touch: campaign parameters, an external referrer, the landing page. */
function currentTouch(): [Touch, boolean] {
  const touch: Touch = {}
  let fresh = false
  new URLSearchParams(location.search).forEach((value, name) => {
    const key = name.toLowerCase()
    if (value && (key.startsWith('utm_') || key === 'gclid' || key === 'fbclid' || key === 'msclkid')) {
      touch[key] = clip(value)
      fresh = true
    }
  })
  try {
    if (doc.referrer && new URL(doc.referrer).host !== location.host) {
      touch.referrer = clip(doc.referrer)
      fresh = true
    }
  } catch {}
  touch.landing_page = clip(location.href)
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
    warn('no data-webhook-url on the script tag: nothing sent')
    return Promise.reject(new Error(`${PREFIX} data-webhook-url is missing`))
  }
  const payload: Fields = {
    ...lead,
    _elapsed_ms: Math.round(performance.now() - loadedAt),
    page_url: location.href,
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
      const result = (await response.json().catch(() => null)) as { success?: boolean } | null
      if (response.ok && result && result.success !== false) log('sent', response.status, result)
      else warn('submission failed:', response.status, result)
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
  if (marker !== null) return marker !== 'off'
  // Auto mode leaves log-in and sign-up forms alone: an e-mail next to a password is not a lead.
  return (
    autoForms &&
    !!form.querySelector('input[type=email],input[type=tel]') &&
    !form.querySelector('input[type=password]')
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
        send(toLead(formEntries(form))).catch(() => {})
      }
    },
    true,
  )
  log('ready', { webhookUrl, autoForms, privacy, attribution })
} else log('already loaded: this copy does nothing')
