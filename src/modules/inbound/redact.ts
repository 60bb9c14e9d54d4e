import {
  isCardFieldName,
  isCardNumberValue,
  mayHoldCardNumber,
  mayNameCardData,
  REDACTED_CARD_NUMBER,
  REMOVED_CARD_FIELD,
  redactCardNumbers,
} from '../../lib/card-data'
import { maskSecretsInText, mayHoldSecret } from '../../lib/secrets'

/**
 * What an inbound request leaves in the database, cleaned before it is stored (not when read):
 * credentials (`flwh_`, `fl_pat_`, `fl_sess_`, `whsec_`) masked, card-named fields dropped, card numbers
 * redacted (lib/card-data.ts). The parsed body is cleaned value by value, after JSON unescaping,
 * so `"\u0066l_pat_…"` is caught like `"fl_pat_…"`; the delivery log then keeps the cleaned body
 * serialised again. A body that is not a JSON object is cleaned as text.
 */
export interface ScrubbedBody {
  /** The body the lead is built from: card-named fields left out. */
  body: Record<string, unknown>
  /** The body text the delivery log keeps: card-named fields shown as REMOVED_CARD_FIELD. */
  logText: string
  /** JSON pointers of what was removed or redacted, never the values. */
  redacted: string[]
}

/**
 * Values nested deeper than this are not walked: they are replaced by TOO_DEEP in the lead and the
 * log, so nothing unchecked is stored and re-serialising the log body stays shallow (JSON.stringify
 * of a 40,000-deep value overflows the stack). No form nests this deep; the JSON depth limit
 * refuses such bodies before they get here.
 */
const MAX_DEPTH = 64
export const TOO_DEEP = '[removed: nested too deep]'

/** Free text (a header, an unparseable body): credentials masked, card numbers redacted. */
export function scrubText(text: string): string {
  return redactCardNumbers(maskSecretsInText(text))
}

export function scrubNullableText(text: string | null): string | null {
  return text === null ? null : scrubText(text)
}

export function scrubBody(
  body: Record<string, unknown>,
  rawText: string,
  isPhoneField: (name: string) => boolean,
): ScrubbedBody {
  // A body with no secret prefix and no escape cannot hold a credential, however it is escaped.
  const secrets = mayHoldSecret(rawText)
  // Each card rule is applied only when the raw text can trigger it (lib/card-data.ts): a body with
  // a `company` field has its names checked, not every value scanned. A \u escape can spell any
  // digit or letter (no other JSON escape spells one, or a separator), so the raw text proves
  // nothing once it holds one.
  const escaped = rawText.includes('\\u')
  const cardNames = escaped || mayNameCardData(rawText)
  const cardNumbers = escaped || mayHoldCardNumber(rawText)
  if (!secrets && !cardNames && !cardNumbers) return { body, logText: rawText, redacted: [] }
  const redacted: string[] = []

  /**
   * [for the lead, for the log]; the same references when nothing changed. `parent` and `key` make
   * the value's JSON pointer, built only when something is redacted (or for a container, whose
   * members need it): most values are walked and left as they were.
   */
  const visit = (
    value: unknown,
    parent: string,
    key: string | null,
    depth: number,
    phone: boolean,
  ): [unknown, unknown] => {
    if (typeof value === 'string') {
      const masked = secrets ? maskSecretsInText(value) : value
      if (!cardNumbers || phone) return [masked, masked]
      const clean = redactCardNumbers(masked)
      if (clean !== masked) redacted.push(pointer(parent, key))
      return [clean, clean]
    }
    if (typeof value === 'number') {
      if (cardNumbers && !phone && isCardNumberValue(value)) {
        redacted.push(pointer(parent, key))
        return [REDACTED_CARD_NUMBER, REDACTED_CARD_NUMBER]
      }
      return [value, value]
    }
    if (typeof value !== 'object' || value === null) return [value, value]
    if (depth > MAX_DEPTH) return [TOO_DEEP, TOO_DEEP]
    const path = pointer(parent, key)
    if (Array.isArray(value)) {
      const lead: unknown[] = []
      const log: unknown[] = []
      let changed = false
      value.forEach((item, index) => {
        const [forLead, forLog] = visit(item, path, String(index), depth + 1, false)
        lead.push(forLead)
        log.push(forLog)
        if (forLead !== item || forLog !== item) changed = true
      })
      return changed ? [lead, log] : [value, value]
    }
    // The copies are built only once something changed: most bodies pass the cheap first look
    // (a field named `company` contains `pan`) and come out unchanged, and building two objects
    // with defineProperty for every field was the larger part of this function's cost.
    const entries = Object.entries(value)
    const cleaned: Array<[key: string, forLead: unknown, forLog: unknown] | [key: string]> = []
    let changed = false
    for (const [key, item] of entries) {
      const cleanKey = secrets ? maskSecretsInText(key) : key
      if (cleanKey !== key) changed = true
      if (cardNames && isCardFieldName(key)) {
        redacted.push(pointer(path, cleanKey))
        cleaned.push([cleanKey])
        changed = true
        continue
      }
      const [forLead, forLog] = visit(item, path, cleanKey, depth + 1, depth === 0 && isPhoneField(key))
      if (forLead !== item || forLog !== item) changed = true
      cleaned.push([cleanKey, forLead, forLog])
    }
    if (!changed) return [value, value]
    const lead: Record<string, unknown> = {}
    const log: Record<string, unknown> = {}
    for (const entry of cleaned) {
      if (entry.length === 1) setOwn(log, entry[0], REMOVED_CARD_FIELD)
      else {
        setOwn(lead, entry[0], entry[1])
        setOwn(log, entry[0], entry[2])
      }
    }
    return [lead, log]
  }

  const [lead, log] = visit(body, '', null, 0, false)
  if (lead === body) return { body, logText: rawText, redacted }
  return { body: lead as Record<string, unknown>, logText: JSON.stringify(log), redacted }
}

/** The JSON pointer (RFC 6901) of member `key` of the value at `parent`; `parent` itself for the root. */
function pointer(parent: string, key: string | null): string {
  return key === null ? parent : `${parent}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`
}

/** Whether a body field lands in `phone_raw` (directly or by the source's field mapping). */
export function isPhoneField(name: string, fieldMapping: Record<string, string>): boolean {
  const mapped = Object.hasOwn(fieldMapping, name) ? fieldMapping[name] : undefined
  return (typeof mapped === 'string' && mapped ? mapped : name) === 'phone_raw'
}

/** `object[key] = value` as an own property, even for `__proto__`. */
function setOwn(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
}
