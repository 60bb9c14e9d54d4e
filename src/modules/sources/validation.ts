import { isSupportedCountry } from 'libphonenumber-js'
import { CUSTOM_FIELD_NAME_PATTERN } from '../../lib/contact'
import type { ValidationDetail } from '../../lib/errors'
import { errors } from '../../lib/errors'
import { parseCidr } from '../../lib/ip'
import { FIELD_MAPPING_MAX_ENTRIES, MAPPING_TARGETS } from './model'

/**
 * Checks that the schema cannot express (address syntax, hostnames, mapping targets, countries),
 * collecting every problem so one 400 names each offending entry. Returns the values as stored.
 */
export interface SourceSettingsInput {
  ip_allowlist?: string[]
  domain_allowlist?: string[]
  field_mapping?: Record<string, string>
  default_country?: string | null
}

export interface SourceSettings {
  ipAllowlist?: string[]
  domainAllowlist?: string[]
  fieldMapping?: Record<string, string>
  defaultCountry?: string | null
}

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?'
const HOSTNAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)
// A wildcard must sit above a registrable-looking name: `*.com` would allow half the internet.
const WILDCARD = new RegExp(`^\\*\\.${LABEL}(?:\\.${LABEL})+$`)

export function validateSourceSettings(input: SourceSettingsInput): SourceSettings {
  const details: ValidationDetail[] = []
  const out: SourceSettings = {}

  if (input.ip_allowlist !== undefined) {
    out.ipAllowlist = unique(
      input.ip_allowlist.map((entry, index) => {
        const trimmed = entry.trim()
        if (!parseCidr(trimmed)) {
          details.push({
            path: `/ip_allowlist/${index}`,
            message: `"${entry}" is not an IPv4/IPv6 address or CIDR range`,
          })
        }
        return trimmed
      }),
    )
  }

  if (input.domain_allowlist !== undefined) {
    out.domainAllowlist = unique(
      input.domain_allowlist.map((entry, index) => {
        const host = entry.trim().toLowerCase()
        const valid = host.length <= 253 && (HOSTNAME.test(host) || WILDCARD.test(host))
        if (!valid) {
          details.push({
            path: `/domain_allowlist/${index}`,
            message: `"${entry}" is not a hostname or a "*.example.com" wildcard (no scheme, port or path)`,
          })
        }
        return host
      }),
    )
  }

  if (input.field_mapping !== undefined) {
    const entries = Object.entries(input.field_mapping)
    if (entries.length > FIELD_MAPPING_MAX_ENTRIES) {
      details.push({
        path: '/field_mapping',
        message: `at most ${FIELD_MAPPING_MAX_ENTRIES} entries, got ${entries.length}`,
      })
    }
    for (const [name, target] of entries) {
      if (!isMappingTarget(target)) {
        details.push({
          path: `/field_mapping/${pointerEscape(name)}`,
          message: `"${target}" is not a lead field: use ${MAPPING_TARGETS.join(', ')} or custom.<name> (name: 1-100 of A-Z a-z 0-9 _ . -)`,
        })
      }
    }
    out.fieldMapping = input.field_mapping
  }

  if (input.default_country !== undefined) {
    const country = input.default_country?.trim().toUpperCase() ?? null
    if (country !== null && !isSupportedCountry(country)) {
      details.push({
        path: '/default_country',
        message: `"${input.default_country}" is not an ISO 3166-1 alpha-2 country code with a phone numbering plan`,
      })
    }
    out.defaultCountry = country
  }

  if (details.length > 0) throw errors.validation('the source settings are not valid', details)
  return out
}

export function isMappingTarget(target: string): boolean {
  if ((MAPPING_TARGETS as readonly string[]).includes(target)) return true
  return target.startsWith('custom.') && CUSTOM_FIELD_NAME_PATTERN.test(target.slice('custom.'.length))
}

function unique(values: string[]): string[] {
  return [...new Set(values)]
}

function pointerEscape(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1')
}
