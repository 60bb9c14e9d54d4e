import type { TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { errors } from '../../lib/errors'
import { allows } from '../../plugins/auth'
import type { Principal } from '../auth/credentials'
import type { IdentityService } from '../auth/service'
import { LogsQuery, type SourceHealth } from '../delivery-logs/model'
import type { DeliveryLogsService } from '../delivery-logs/service'
import { LeadExportQuery, LeadListQuery, UpdateLeadBody } from '../leads/model'
import type { LeadsService } from '../leads/service'
import { AddMemberRequest, ChangeRoleRequest } from '../members/model'
import type { MembersService } from '../members/service'
import { CreatePatRequest } from '../pat/model'
import type { PatService } from '../pat/service'
import { RegenerateKeyBody, type SourceRecord, UpdateSourceBody } from '../sources/model'
import type { SourcesService } from '../sources/service'
import { PAGE_ACCESS } from './access'
import type { LeadForm, LeadsPageQuery, LogsPageQuery, SourceForm } from './model'

export const SOURCES_PAGE_SIZE = 50
export const LOGS_PAGE_SIZE = 50
export const LEADS_PAGE_SIZE = 50

export interface SourceSummary {
  source: SourceRecord
  /** null when the plan does not include health (the API would answer 403 too). */
  health: SourceHealth | null
}

/**
 * Input from a form, checked against the API route's own schema: one rule for a field, whether it
 * arrives as JSON or from the dashboard. A mismatch is the 400 the API would answer.
 */
export function checkAgainst<Schema extends TSchema>(schema: Schema, value: unknown): Schema['static'] {
  if (Value.Check(schema, value)) return value as Schema['static']
  const details = [...Value.Errors(schema, value)].slice(0, 20).map((error) => ({
    path: error.path || '/',
    message: error.message,
  }))
  throw errors.validation('the form is not valid', details)
}

function lines(text: string | undefined): string[] {
  return (text ?? '')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean)
}

/** `from = to` per line, as the settings form shows the field mapping. */
export function parseFieldMapping(text: string | undefined): Record<string, string> {
  const mapping: Record<string, string> = {}
  for (const line of lines(text)) {
    const separator = line.indexOf('=')
    if (separator <= 0) {
      throw errors.validation('the field mapping is not valid', [
        { path: '/field_mapping', message: `"${line}" is not "form field = lead field"` },
      ])
    }
    mapping[line.slice(0, separator).trim()] = line.slice(separator + 1).trim()
  }
  return mapping
}

export function formatFieldMapping(mapping: Record<string, string>): string {
  return Object.entries(mapping)
    .map(([from, to]) => `${from} = ${to}`)
    .join('\n')
}

/**
 * What the pages show, from the services the API routes call (never over HTTP). Reads that need
 * a requirement the page itself does not (health on the sources page) are made only for a
 * principal the matching API route would allow.
 */
/** The API's services the pages call: a page does exactly what its API route does. */
export interface DashboardServices {
  identity: IdentityService
  deliveryLogs: DeliveryLogsService
  leads: LeadsService
  members: MembersService
  pat: PatService
  sources: SourcesService
}

export class DashboardService {
  constructor(private readonly services: DashboardServices) {}

  signIn(email: string, password: string) {
    return this.services.identity.login({ email, password })
  }

  signUp(input: { email: string; password: string; organization_name: string }) {
    return this.services.identity.signup(input)
  }

  signOut(principal: Principal) {
    return this.services.identity.logout(principal)
  }

  async sources(principal: Principal, cursor: string | undefined) {
    const page = await this.services.sources.list(principal.organizationId, {
      limit: SOURCES_PAGE_SIZE,
      cursor,
    })
    const withHealth = allows(principal, PAGE_ACCESS.health)
    const logs = this.services.deliveryLogs
    const summaries: SourceSummary[] = await Promise.all(
      page.data.map(async (source) => ({
        source,
        health: withHealth ? await logs.health(principal.organizationId, source.id) : null,
      })),
    )
    return { summaries, nextCursor: page.next_cursor }
  }

  createSource(principal: Principal, name: string) {
    return this.services.sources.create(principal.organizationId, { name })
  }

  async source(principal: Principal, id: string) {
    const source = await this.services.sources.get(principal.organizationId, id)
    const health = allows(principal, PAGE_ACCESS.health)
      ? await this.services.deliveryLogs.health(principal.organizationId, id)
      : null
    return { source, health }
  }

  updateSource(principal: Principal, id: string, form: SourceForm) {
    const body = checkAgainst(UpdateSourceBody, {
      name: form.name,
      enabled: form.enabled === 'on',
      spam_filter: form.spam_filter === 'on',
      ip_allowlist: lines(form.ip_allowlist),
      domain_allowlist: lines(form.domain_allowlist),
      field_mapping: parseFieldMapping(form.field_mapping),
      default_country: form.default_country?.trim() ? form.default_country.trim() : null,
    })
    return this.services.sources.update(principal.organizationId, id, body)
  }

  regenerateKey(principal: Principal, id: string, graceSeconds: string | undefined) {
    const body = checkAgainst(RegenerateKeyBody, { grace_seconds: Number(graceSeconds ?? 0) })
    return this.services.sources.regenerateKey(principal.organizationId, id, body?.grace_seconds ?? 0)
  }

  async logs(principal: Principal, sourceId: string, query: LogsPageQuery) {
    const source = await this.services.sources.get(principal.organizationId, sourceId)
    const filters = checkAgainst(LogsQuery, {
      limit: LOGS_PAGE_SIZE,
      ...(query.outcome ? { outcome: query.outcome } : {}),
      ...(query.status ? { status: Number(query.status) } : {}),
      ...(query.since ? { since: toIsoInstant(query.since) } : {}),
      ...(query.until ? { until: toIsoInstant(query.until) } : {}),
      ...(query.cursor ? { cursor: query.cursor } : {}),
    })
    const page = await this.services.deliveryLogs.list(principal.organizationId, sourceId, filters)
    return { source, page }
  }

  async logEntry(principal: Principal, sourceId: string, logId: string) {
    const source = await this.services.sources.get(principal.organizationId, sourceId)
    const entry = await this.services.deliveryLogs.get(principal.organizationId, sourceId, logId)
    return { source, entry }
  }

  async leads(principal: Principal, query: LeadsPageQuery) {
    const filters = checkAgainst(LeadListQuery, {
      limit: LEADS_PAGE_SIZE,
      ...(query.q?.trim() ? { q: query.q.trim() } : {}),
      ...(query.source_id ? { source_id: query.source_id } : {}),
      ...(query.cursor ? { cursor: query.cursor } : {}),
    })
    return this.services.leads.list(principal.organizationId, filters)
  }

  lead(principal: Principal, id: string) {
    return this.services.leads.get(principal.organizationId, id)
  }

  /**
   * The edit form sends every field; an empty one clears it, as `null` does in the API. Custom
   * fields arrive as JSON text and replace the lead's whole, as in the API.
   */
  updateLead(principal: Principal, id: string, form: LeadForm) {
    const body = checkAgainst(UpdateLeadBody, {
      first_name: form.first_name ?? null,
      last_name: form.last_name ?? null,
      email: form.email ?? null,
      phone_raw: form.phone_raw ?? null,
      status: form.status ?? null,
      custom_fields: parseCustomFields(form.custom_fields),
    })
    return this.services.leads.update(principal.organizationId, id, body)
  }

  deleteLead(principal: Principal, id: string) {
    return this.services.leads.remove(principal.organizationId, id)
  }

  exportLeads(principal: Principal, query: LeadsPageQuery) {
    const filters = checkAgainst(LeadExportQuery, {
      ...(query.q?.trim() ? { q: query.q.trim() } : {}),
      ...(query.source_id ? { source_id: query.source_id } : {}),
    })
    return this.services.leads.exportCsv(principal.organizationId, filters)
  }

  deleteSource(principal: Principal, id: string) {
    return this.services.sources.remove(principal.organizationId, id)
  }

  tokens(principal: Principal) {
    return this.services.pat.list(principal, { limit: 200 })
  }

  createToken(
    principal: Principal,
    form: { name: string; scopes?: string | string[]; expires_in_days?: string },
  ) {
    const scopes = form.scopes === undefined ? [] : Array.isArray(form.scopes) ? form.scopes : [form.scopes]
    const input = checkAgainst(CreatePatRequest, {
      name: form.name,
      scopes,
      ...(form.expires_in_days ? { expires_in_days: Number(form.expires_in_days) } : {}),
    })
    return this.services.pat.create(principal, input)
  }

  revokeToken(principal: Principal, tokenId: string) {
    return this.services.pat.revoke(principal, tokenId)
  }

  members(principal: Principal) {
    return this.services.members.list(principal, { limit: 200 })
  }

  member(principal: Principal, userId: string) {
    return this.services.members.get(principal, userId)
  }

  async changeMemberRole(principal: Principal, userId: string, role: string) {
    const { role: checked } = checkAgainst(ChangeRoleRequest, { role })
    // The API's path schema refuses an id that is not a UUID; here it is what it means: no member.
    await this.member(principal, userId)
    return this.services.members.changeRole(principal, userId, checked)
  }

  async removeMember(principal: Principal, userId: string) {
    const member = await this.member(principal, userId)
    await this.services.members.remove(principal, userId)
    return member
  }

  addMember(principal: Principal, form: { email: string; password: string; role: string }) {
    const input = checkAgainst(AddMemberRequest, {
      email: form.email,
      password: form.password,
      role: form.role,
    })
    return this.services.members.add(principal, input)
  }
}

/** The custom-fields textarea: a JSON object, or empty for none. */
function parseCustomFields(text: string | undefined): unknown {
  if (!text?.trim()) return {}
  try {
    return JSON.parse(text)
  } catch {
    throw errors.validation('the custom fields are not valid', [
      { path: '/custom_fields', message: 'must be a JSON object, e.g. {"company": "Acme"}' },
    ])
  }
}

/** `2026-01-01T10:00` (a datetime-local input, read as UTC) or a full ISO instant. */
function toIsoInstant(text: string): string {
  const value = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(text) ? `${text}:00Z` : text
  return value
}
