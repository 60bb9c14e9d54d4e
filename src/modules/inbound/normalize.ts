import {
  CUSTOM_FIELD_NAME_PATTERN,
  CUSTOM_FIELDS_MAX_COUNT,
  LEAD_FIELDS,
  type LeadField,
  normalizeEmail,
  normalizePhone,
} from '../../lib/contact'
import type { ValidationDetail } from '../../lib/errors'

export { CUSTOM_FIELDS_MAX_COUNT, LEAD_FIELDS }

/** Fields the tracker sends that are not lead data: kept as attribution, never as custom fields. */
const TRACKER_FIELDS = new Set(['attribution', 'page_url'])
// Their size needs no cap of its own: the whole body is at most 100 KB.
const ATTRIBUTION_MAX_BYTES = 8 * 1024

export interface NormalizedLead {
  firstName: string | null
  lastName: string | null
  email: string | null
  /** trim + lower-case, only when the e-mail looks valid: the dedup key */
  emailNormalized: string | null
  phoneRaw: string | null
  /** E.164, only when the phone parses as valid: the dedup key */
  phoneE164: string | null
  status: string | null
  customFields: Record<string, unknown>
  attribution: Record<string, unknown>
  /** Underscore fields (`_gotcha`, `_hp`, `_elapsed_ms`): signals for the spam rules, never stored. */
  signals: Record<string, unknown>
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Applies the source's field mapping, then checks field types and sizes. Returns the lead, or the
 * list of problems (each with the JSON pointer of the offending field) for a 400.
 */
export function normalizeLead(
  body: Record<string, unknown>,
  source: { fieldMapping: Record<string, string>; defaultCountry: string | null },
): { lead: NormalizedLead; details: ValidationDetail[] } {
  const details: ValidationDetail[] = []
  const values: Partial<Record<LeadField, string>> = {}
  const customFields: Record<string, unknown> = {}
  const signals: Record<string, unknown> = {}
  let attribution: Record<string, unknown> = {}

  const assign = (target: string, value: unknown, path: string) => {
    if (target.startsWith('custom.')) {
      setOwn(customFields, target.slice('custom.'.length), value)
      return
    }
    if (!Object.hasOwn(LEAD_FIELDS, target)) return
    if (value === null || value === undefined) return
    if (typeof value !== 'string') {
      details.push({
        path,
        message: `must be a string, got ${Array.isArray(value) ? 'array' : typeof value}`,
      })
      return
    }
    const { maxLength } = LEAD_FIELDS[target as LeadField]
    if (value.length > maxLength) {
      details.push({ path, message: `must be at most ${maxLength} characters` })
      return
    }
    const trimmed = value.trim()
    if (trimmed) values[target as LeadField] = trimmed
  }

  for (const [name, value] of Object.entries(body)) {
    const path = `/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`
    // Own properties only: a field named `toString` or `__proto__` is data, not a prototype member.
    const mapped = Object.hasOwn(source.fieldMapping, name) ? source.fieldMapping[name] : undefined
    if (typeof mapped === 'string' && mapped) assign(mapped, value, path)
    else if (Object.hasOwn(LEAD_FIELDS, name)) assign(name, value, path)
    else if (name.startsWith('_')) setOwn(signals, name, value)
    else if (name === 'attribution') {
      if (value === null || value === undefined) continue
      if (!isPlainObject(value)) details.push({ path, message: 'must be an object' })
      else attribution = { ...attribution, ...value }
    } else if (name === 'page_url') {
      if (typeof value === 'string') attribution.page_url = value.slice(0, 2048)
      else if (value !== null && value !== undefined) details.push({ path, message: 'must be a string' })
    } else if (!TRACKER_FIELDS.has(name)) setOwn(customFields, name, value)
  }

  const customKeys = Object.keys(customFields)
  if (customKeys.length > CUSTOM_FIELDS_MAX_COUNT) {
    details.push({
      path: '/',
      message: `at most ${CUSTOM_FIELDS_MAX_COUNT} custom fields are kept, got ${customKeys.length}`,
    })
  }
  for (const key of customKeys) {
    if (!CUSTOM_FIELD_NAME_PATTERN.test(key)) {
      details.push({
        path: `/${key}`,
        message: 'custom field names are 1-100 characters of A-Z a-z 0-9 _ . -',
      })
    }
  }
  if (JSON.stringify(attribution).length > ATTRIBUTION_MAX_BYTES) {
    details.push({ path: '/attribution', message: `must be at most ${ATTRIBUTION_MAX_BYTES} bytes of JSON` })
  }

  // A full name fills whichever of first and last name is missing.
  if (values.full_name) {
    const [first, ...rest] = values.full_name.split(/\s+/)
    values.first_name ??= first
    if (rest.length > 0) values.last_name ??= rest.join(' ')
  }

  const email = values.email ?? null
  const phoneRaw = values.phone_raw ?? null
  return {
    details,
    lead: {
      firstName: values.first_name ?? null,
      lastName: values.last_name ?? null,
      email,
      emailNormalized: normalizeEmail(email),
      phoneRaw,
      phoneE164: normalizePhone(phoneRaw, source.defaultCountry),
      status: values.status ?? null,
      customFields,
      attribution,
      signals,
    },
  }
}

/** `object[key] = value` as an own property, even for `__proto__`. */
function setOwn(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
}
