import { type CountryCode, parsePhoneNumberFromString } from 'libphonenumber-js'

// What a lead is made of and how its contact data is normalised: one definition for the inbound
// endpoint, the leads API and source field mappings, so duplicate detection and custom-field names
// are the same whichever way a lead arrives or changes. Account e-mails share the canonical form.

/** The lead fields of the inbound body (spec §2) plus `full_name`, which is split into the two. */
export const LEAD_FIELDS = {
  first_name: { maxLength: 200 },
  last_name: { maxLength: 200 },
  full_name: { maxLength: 400 },
  email: { maxLength: 320 },
  phone_raw: { maxLength: 50 },
  status: { maxLength: 50 },
} as const
export type LeadField = keyof typeof LEAD_FIELDS

export const CUSTOM_FIELDS_MAX_COUNT = 50
/**
 * Names a custom field may have, wherever one is named: an inbound body's extra field, a lead edit's
 * `custom_fields`, a source mapping's `custom.<name>` target (a mapping to any other name would make
 * every request carrying the field fail validation on the inbound path).
 */
export const CUSTOM_FIELD_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,100}$/

const EMAIL_PATTERN = /^[^\s@"<>(),;:]+@[^\s@"<>(),;:]+\.[^\s@"<>(),;:]{2,}$/

/**
 * Trimmed and lower-cased: how an address is compared. Accounts are stored and looked up in this
 * form (the unique index on `users.email` is on it); a lead's dedup key is this form when valid.
 */
export function canonicalEmail(email: string): string {
  return email.trim().toLowerCase()
}

/** A lead's e-mail dedup key: the canonical form when it is a valid address, else null. */
export function normalizeEmail(email: string | null): string | null {
  if (!email) return null
  const normalized = canonicalEmail(email)
  return normalized.length <= 254 && EMAIL_PATTERN.test(normalized) ? normalized : null
}

export function normalizePhone(phone: string | null, defaultCountry: string | null): string | null {
  if (!phone) return null
  const parsed = parsePhoneNumberFromString(phone, (defaultCountry ?? undefined) as CountryCode | undefined)
  return parsed?.isValid() ? parsed.number : null
}
