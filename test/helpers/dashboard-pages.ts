import type { FakeClock } from '../../src/lib/clock'
import type { Role } from '../../src/lib/permissions'
import type { PAGE_ACCESS } from '../../src/modules/dashboard/access'
import { sendMix } from './delivery-traffic'
import { createLead, createPat, createSignedInUser, createSource, createUser } from './factories'
import type { makeTestApp } from './test-app'

/**
 * The dashboard's pages and actions with the data they name: shared by the permission tests
 * (test/integration/dashboard-pages.test.ts) and the base-path walk (dashboard-base-path.test.ts).
 */
type App = Awaited<ReturnType<typeof makeTestApp>>['app']
type Ctx = Awaited<ReturnType<typeof makeTestApp>>['ctx']

/** One organization with a source, a lead, a log entry and a PAT: what the routes name. */
export async function organizationWithData(
  ctx: Ctx,
  app: App,
  clock: FakeClock,
  options: { plan?: string; role?: Role } = {},
) {
  const { organization, user } = await createSignedInUser(ctx, { plan: options.plan })
  const { source, apiKey } = await createSource(ctx, organization.id, {
    name: `Source of ${organization.id.slice(-6)}`,
    ipAllowlist: ['10.0.0.0/8'],
  })
  await sendMix(app, apiKey, clock)
  const [entry] = (await credentialFree(ctx, organization.id, source.id)).data
  const lead = await createLead(ctx, organization.id, {
    sourceId: source.id,
    email: `lead-${organization.id}@example.com`,
  })
  const pat = await createPat(ctx, user, { name: `pat of ${organization.id.slice(-6)}` })
  const actor =
    options.role && options.role !== 'owner'
      ? await createUser(ctx, organization.id, { role: options.role })
      : user
  // A member the member routes act on: a viewer, whom every role allowed to manage members may change.
  const member = await createUser(ctx, organization.id, { role: 'viewer' })
  return { organization, user, actor, source, apiKey, logId: entry!.id, lead, pat, member }
}

/** The logs as the service lists them (it holds no state, so a service of its own reads the same rows). */
export async function credentialFree(ctx: Ctx, organizationId: string, sourceId: string) {
  const { DeliveryLogsService } = await import('../../src/modules/delivery-logs/service')
  return new DeliveryLogsService(ctx).list(organizationId, sourceId, { limit: 50 })
}

export type Data = Awaited<ReturnType<typeof organizationWithData>>

/**
 * Every page and action, with what the API route behind it requires. The deletions come last
 * (each answers 303 to its list), so the pages before them still find what they name.
 */
export const PAGES: Array<{
  method: 'GET' | 'POST'
  path: (data: Data) => string
  requires: keyof typeof PAGE_ACCESS
  form?: (data: Data) => Record<string, string>
  /** Where an allowed deletion sends the browser (Post/Redirect/Get). */
  redirectsTo?: string
}> = [
  { method: 'GET', path: () => '/app/sources', requires: 'sources' },
  { method: 'POST', path: () => '/app/sources', requires: 'createSource', form: () => ({ name: 'New' }) },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}`, requires: 'sources' },
  {
    method: 'POST',
    path: (data) => `/app/sources/${data.source.id}`,
    requires: 'updateSource',
    form: () => ({ name: 'Renamed' }),
  },
  {
    method: 'POST',
    path: (data) => `/app/sources/${data.source.id}/regenerate-key`,
    requires: 'regenerateKey',
    form: () => ({}),
  },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/logs`, requires: 'logs' },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/logs/${data.logId}`, requires: 'logs' },
  { method: 'GET', path: () => '/app/leads', requires: 'leads' },
  { method: 'GET', path: () => '/app/leads/export.csv', requires: 'leads' },
  { method: 'GET', path: () => '/app/tokens', requires: 'tokens' },
  { method: 'POST', path: () => '/app/tokens', requires: 'createToken', form: () => ({ name: 'ci' }) },
  { method: 'GET', path: () => '/app/members', requires: 'members' },
  {
    method: 'POST',
    path: () => '/app/members',
    requires: 'members',
    form: () => ({
      email: `m-${crypto.randomUUID()}@example.com`,
      password: 'correct horse battery staple',
      role: 'viewer',
    }),
  },
  { method: 'GET', path: (data) => `/app/leads/${data.lead.id}`, requires: 'leads' },
  {
    method: 'POST',
    path: (data) => `/app/leads/${data.lead.id}`,
    requires: 'editLead',
    form: (data) => ({ email: data.lead.email!, status: 'qualified' }),
  },
  { method: 'GET', path: (data) => `/app/leads/${data.lead.id}/delete`, requires: 'deleteLead' },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/delete`, requires: 'deleteSource' },
  {
    method: 'POST',
    path: (data) => `/app/members/${data.member.id}/role`,
    requires: 'members',
    form: () => ({ role: 'member' }),
  },
  { method: 'GET', path: (data) => `/app/members/${data.member.id}/remove`, requires: 'members' },
  {
    method: 'POST',
    path: (data) => `/app/members/${data.member.id}/remove`,
    requires: 'members',
    form: () => ({}),
  },
  {
    method: 'POST',
    path: (data) => `/app/leads/${data.lead.id}/delete`,
    requires: 'deleteLead',
    form: () => ({}),
    redirectsTo: '/app/leads?deleted=1',
  },
  {
    method: 'POST',
    path: (data) => `/app/sources/${data.source.id}/delete`,
    requires: 'deleteSource',
    form: () => ({}),
    redirectsTo: '/app/sources?deleted=1',
  },
]
