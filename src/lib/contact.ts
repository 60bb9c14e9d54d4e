import { type CountryCode, parsePhoneNumberFromString } from 'libphonenumber-js'

// What a lead is made of and how its contact data is normalised: one definition for the inbound
// endpoint and the leads API, so duplicate detection is the same whichever way a lead changes.

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

const EMAIL_PATTERN = /^[^\s@"<>(),;:]+@[^\s@"<>(),;:]+\.[^\s@"<>(),;:]{2,}$/

export function normalizeEmail(email: string | null): string | null {
  if (!email) return null
  const normalized = email.trim().toLowerCase()
  return normalized.length <= 254 && EMAIL_PATTERN.test(normalized) ? normalized : null
}

export function normalizePhone(phone: string | null, defaultCountry: string | null): string | null {
  if (!phone) return null
  const parsed = parsePhoneNumberFromString(phone, (defaultCountry ?? undefined) as CountryCode | undefined)
  return parsed?.isValid() ? parsed.number : null
}
