import type { NormalizedLead } from './normalize'

/** Submitted sooner than this after the page loaded (tracker's `_elapsed_ms`): a person can't. */
export const MIN_HUMAN_ELAPSED_MS = 1500

const HONEYPOT_FIELDS = ['_gotcha', '_hp']
const LINK_PATTERN = /(https?:\/\/|www\.|\[url|<a\s)/i

// Common throw-away mailbox providers. Kept short on purpose: it catches the bulk of abuse without
// refusing real people; the reason is logged so a wrongly flagged lead can be found.
export const DISPOSABLE_EMAIL_DOMAINS = new Set([
  '10minutemail.com',
  'dispostable.com',
  'fakeinbox.com',
  'getnada.com',
  'guerrillamail.com',
  'guerrillamail.net',
  'mailinator.com',
  'maildrop.cc',
  'mintemail.com',
  'sharklasers.com',
  'temp-mail.org',
  'tempmail.com',
  'throwawaymail.com',
  'trashmail.com',
  'yopmail.com',
])

/** The reasons a submission is spam; empty when it is not. */
export function spamReasons(lead: NormalizedLead): string[] {
  const reasons: string[] = []
  for (const field of HONEYPOT_FIELDS) {
    const value = lead.signals[field]
    if (value !== undefined && value !== null && value !== '' && value !== false) {
      reasons.push(`honeypot_filled:${field}`)
    }
  }
  if ([lead.firstName, lead.lastName].some((name) => name && LINK_PATTERN.test(name))) {
    reasons.push('link_in_name')
  }
  const domain = lead.emailNormalized?.split('@')[1]
  if (domain && DISPOSABLE_EMAIL_DOMAINS.has(domain)) reasons.push('disposable_email_domain')
  const elapsed = lead.signals._elapsed_ms
  if (
    typeof elapsed === 'number' &&
    Number.isFinite(elapsed) &&
    elapsed >= 0 &&
    elapsed < MIN_HUMAN_ELAPSED_MS
  ) {
    reasons.push('submitted_too_fast')
  }
  return reasons
}
