import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { leads, personalAccessTokens, users, webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { ROLES } from '../../src/lib/permissions'
import type { Principal } from '../../src/modules/auth/credentials'
import { PAGE_ACCESS } from '../../src/modules/dashboard/access'
import { allows } from '../../src/plugins/auth'
import { csvRecords } from '../helpers/csv'
import { DashboardClient } from '../helpers/dashboard'
import { credentialFree, type Data, organizationWithData, PAGES } from '../helpers/dashboard-pages'
import {
  createLead,
  createPat,
  createSession,
  createSignedInUser,
  createSource,
  createUser,
} from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** Every dashboard route that names a resource, with the form a POST needs. */
const RESOURCE_ROUTES: Array<{
  method: 'GET' | 'POST'
  path: (data: Data) => string
  form?: Record<string, string>
  /** A list filtered by another organization's id: 200 and none of their rows, not a 404. */
  filter?: true
}> = [
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}` },
  { method: 'POST', path: (data) => `/app/sources/${data.source.id}`, form: { name: 'Taken over' } },
  {
    method: 'POST',
    path: (data) => `/app/sources/${data.source.id}/regenerate-key`,
    form: { grace_seconds: '0' },
  },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/logs` },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/logs/${data.logId}` },
  { method: 'POST', path: (data) => `/app/tokens/${data.pat.tokenId}/revoke` },
  { method: 'GET', path: (data) => `/app/leads?source_id=${data.source.id}`, filter: true },
  { method: 'GET', path: (data) => `/app/leads/export.csv?source_id=${data.source.id}`, filter: true },
  { method: 'GET', path: (data) => `/app/sources/${data.source.id}/delete` },
  { method: 'POST', path: (data) => `/app/sources/${data.source.id}/delete` },
  { method: 'GET', path: (data) => `/app/leads/${data.lead.id}` },
  {
    method: 'POST',
    path: (data) => `/app/leads/${data.lead.id}`,
    form: { email: 'taken-over@example.com', status: 'stolen' },
  },
  { method: 'GET', path: (data) => `/app/leads/${data.lead.id}/delete` },
  { method: 'POST', path: (data) => `/app/leads/${data.lead.id}/delete` },
  { method: 'POST', path: (data) => `/app/members/${data.member.id}/role`, form: { role: 'owner' } },
  { method: 'GET', path: (data) => `/app/members/${data.member.id}/remove` },
  { method: 'POST', path: (data) => `/app/members/${data.member.id}/remove` },
]

/** The route labels of the tables: the paths with their parameters named. */
const PLACEHOLDERS = {
  source: { id: ':id' },
  logId: ':log_id',
  pat: { tokenId: ':token_id' },
  lead: { id: ':lead_id' },
  member: { id: ':user_id' },
} as unknown as Data

describe('BOLA: another organization’s resources', () => {
  for (const route of RESOURCE_ROUTES) {
    const label = `${route.method} ${route.path(PLACEHOLDERS)}`
    test(`${label}: never shows or changes them`, async () => {
      const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
      const { app, ctx } = await makeTestApp({ clock })
      const mine = await organizationWithData(ctx, app, clock)
      const theirs = await organizationWithData(ctx, app, clock)
      const client = await DashboardClient.signedIn(app, ctx, mine.user.id)
      const response =
        route.method === 'GET'
          ? await client.get(route.path(theirs))
          : await client.submit('/app/tokens', route.path(theirs), route.form ?? {})
      const body = await response.text()
      if (route.filter) {
        // A filter naming another organization's source matches nothing of theirs.
        expect(response.status).toBe(200)
        expect(body).not.toContain(theirs.lead.email!)
      } else {
        expect(response.status).toBe(404)
        expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      }
      expect(body).not.toContain(theirs.source.name)
      expect(body).not.toContain(theirs.pat.token)
      // Their rows are as they were.
      const [source] = await ctx.db
        .select()
        .from(webhookSources)
        .where(eq(webhookSources.id, theirs.source.id))
      expect({ name: source!.name, keyHint: source!.keyHint }).toEqual({
        name: theirs.source.name,
        keyHint: theirs.source.keyHint,
      })
      const [pat] = await ctx.db
        .select()
        .from(personalAccessTokens)
        .where(eq(personalAccessTokens.id, theirs.pat.tokenId))
      expect(pat!.revokedAt).toBeNull()
      const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, theirs.lead.id))
      expect({ email: lead?.email, status: lead?.status }).toEqual({
        email: theirs.lead.email,
        status: theirs.lead.status,
      })
      const [member] = await ctx.db.select().from(users).where(eq(users.id, theirs.member.id))
      expect(member?.role).toBe('viewer')
    })
  }

  test('the table covers every dashboard route that names something', async () => {
    const { app } = await makeTestApp()
    const shape = (path: string) => path.split('?')[0]!.replace(/:[a-z_]+/g, ':')
    const named = (app.routes as Array<{ method: string; path: string }>)
      .filter((route) => route.path.startsWith('/app/') && route.path.includes(':'))
      .filter((route) => route.path !== '/app/assets/:file')
      .map((route) => `${route.method} ${shape(route.path)}`)
    const covered = new Set(
      RESOURCE_ROUTES.map((route) => `${route.method} ${shape(route.path(PLACEHOLDERS))}`),
    )
    expect(named).toContain('POST /app/members/:/remove')
    expect(named.filter((route) => !covered.has(route))).toEqual([])
  })

  test('an id that is not a UUID is a 404 page too', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    for (const path of [
      '/app/sources/nope',
      '/app/sources/nope/logs/also-nope',
      '/app/sources/nope/delete',
      '/app/leads/nope',
      '/app/leads/nope/delete',
      '/app/members/nope/remove',
    ]) {
      const response = await client.get(path)
      expect({ path, status: response.status }).toEqual({ path, status: 404 })
    }
  })
})

describe('permissions and plans: a page allows exactly what its API route allows', () => {
  for (const plan of ['pro', 'free']) {
    for (const role of ROLES) {
      test(`${role} on ${plan}`, async () => {
        const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
        const { app, ctx, services } = await makeTestApp({ clock })
        const data = await organizationWithData(ctx, app, clock, { plan, role })
        const sessionToken = await createSession(ctx, data.actor.id)
        const authentication = await services.credentials.resolve(sessionToken)
        const principal = (authentication as { principal: Principal }).principal
        const client = await DashboardClient.signedIn(app, ctx, data.actor.id)
        for (const page of PAGES) {
          const path = page.path(data)
          const response =
            page.method === 'GET'
              ? await client.get(path)
              : await client.submit('/app/tokens', path, page.form?.(data) ?? {})
          const allowed = allows(principal, PAGE_ACCESS[page.requires])
          const label = `${page.method} ${path}`
          if (allowed && page.redirectsTo) {
            expect({ label, status: response.status, location: response.headers.get('location') }).toEqual({
              label,
              status: 303,
              location: page.redirectsTo,
            })
          } else if (allowed)
            expect({ label, ok: [200, 201].includes(response.status) }).toEqual({ label, ok: true })
          else {
            expect({ label, status: response.status }).toEqual({ label, status: 403 })
            expect(await response.text()).toContain('role="alert"')
          }
        }
        // The navigation offers only what the role and plan allow.
        const nav = await (await client.get('/app/tokens')).text()
        for (const [href, requires] of [
          ['/app/sources', 'sources'],
          ['/app/leads', 'leads'],
          ['/app/members', 'members'],
        ] as const) {
          expect({ href, shown: nav.includes(`href="${href}"`) }).toEqual({
            href,
            shown: allows(principal, PAGE_ACCESS[requires]),
          })
        }
      })
    }
  }

  test('a viewer sees leads read-only: no settings, no key regeneration, no member form', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock, { role: 'viewer' })
    const client = await DashboardClient.signedIn(app, ctx, data.actor.id)
    expect((await client.get('/app')).headers.get('location')).toBe('/app/leads')
    const leads = await (await client.get('/app/leads')).text()
    expect(leads).toContain(data.lead.email!)
    // The only form that changes anything is signing out.
    expect([...leads.matchAll(/method="post"/g)]).toHaveLength(1)
    expect(leads).toContain('action="/app/sign-out"')
    const tokens = await (await client.get('/app/tokens')).text()
    expect(tokens).not.toContain('Create token')
    // The lead's own page: its fields as text, no edit form, no way to delete.
    const lead = await (await client.get(`/app/leads/${data.lead.id}`)).text()
    expect(lead).toContain(data.lead.email!)
    expect([...lead.matchAll(/method="post"/g)]).toHaveLength(1)
    expect(lead).not.toContain('/delete"')
  })

  test('a free plan sees its sources without health, and no settings form', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock, { plan: 'free' })
    const client = await DashboardClient.signedIn(app, ctx, data.user.id)
    const list = await (await client.get('/app/sources')).text()
    expect(list).toContain(data.source.name)
    expect(list).not.toContain('Success rate')
    const page = await (await client.get(`/app/sources/${data.source.id}`)).text()
    expect(page).not.toContain('Last 24 hours')
    expect(page).not.toContain('Save settings')
    // A leaked key must stay revocable after a downgrade, as in the API.
    expect(page).toContain('Regenerate key')
  })
})

describe('pages', () => {
  test('the sources list: status badge, requests and success rate in 24 h, last request', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx, services } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock)
    const client = await DashboardClient.signedIn(app, ctx, data.user.id)
    const response = await client.get('/app/sources')
    expect(response.status).toBe(200)
    const html = await response.text()
    const health = await services.deliveryLogs.health(data.organization.id, data.source.id)
    expect(html).toContain(`<a href="/app/sources/${data.source.id}">${data.source.name}</a>`)
    expect(html).toContain(`<span class="badge ${health.status}">${health.status}</span>`)
    expect(html).toContain(`<td>${health.totals.requests}</td>`)
    expect(html).toContain(`${(health.success_rate! * 100).toFixed(1)}%`)
  })

  test('the source page: chart data per hour and outcome, latency, rejections, problems linking to their entries, snippet', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx, services } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock)
    const client = await DashboardClient.signedIn(app, ctx, data.user.id)
    const html = await (await client.get(`/app/sources/${data.source.id}`)).text()
    const health = await services.deliveryLogs.health(data.organization.id, data.source.id)
    const json = /<script type="application\/json" id="hourly-chart-data">(.*?)<\/script>/s.exec(html)![1]!
    const chart = JSON.parse(json)
    expect(chart.hours).toHaveLength(24)
    for (const outcome of ['created', 'updated', 'spam', 'error', 'rejected'] as const) {
      expect(chart.series[outcome]).toEqual(health.hourly.map((bucket) => bucket[outcome]))
    }
    expect(html).toContain(`${health.latency_ms.p50} / ${health.latency_ms.p95} ms`)
    for (const rejection of health.rejections) expect(html).toContain(rejection.reason)
    for (const problem of health.recent_problems) {
      expect(html).toContain(`href="/app/sources/${data.source.id}/logs/${problem.id}"`)
    }
    expect(html).toContain('/api/webhook/tracker.js')
    expect(html).toContain('curl -X POST')
  })

  test('text from forms and leads is escaped everywhere it is shown', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const hostile = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>'
    const { source } = await createSource(ctx, owner.organization.id, { name: hostile, domainAllowlist: [] })
    await createLead(ctx, owner.organization.id, {
      firstName: hostile,
      email: 'x@example.com',
      status: '<b>x</b>',
    })
    await createPat(ctx, owner.user, { name: hostile })
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    for (const path of [
      '/app/sources',
      `/app/sources/${source.id}`,
      '/app/leads',
      '/app/tokens',
      `/app/sources/${source.id}/logs`,
    ]) {
      // Inside a quoted attribute `<` is text; `"` is escaped there, so strip attribute values.
      const html = (await (await client.get(path)).text()).replace(/="[^"]*"/g, '=""')
      expect({
        path,
        raw: html.includes('<script>alert(1)') || html.includes('<img src=x') || html.includes('<b>x</b>'),
      }).toEqual({ path, raw: false })
    }
    const html = await (await client.get('/app/sources')).text()
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
  })

  test('settings: saved through the form, refused entries named, as the API validates them', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const page = `/app/sources/${source.id}`
    const saved = await client.submit(page, page, {
      name: 'Contact form',
      spam_filter: 'on',
      domain_allowlist: 'example.com\r\n*.example.org\r\n',
      ip_allowlist: '203.0.113.0/24',
      field_mapping: 'your_email = email\ntel = phone_raw',
      default_country: 'de',
    })
    expect(saved.status).toBe(200)
    expect(await saved.text()).toContain('Settings saved.')
    const [row] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id))
    expect({
      name: row!.name,
      enabled: row!.enabled,
      spamFilter: row!.spamFilter,
      domains: row!.domainAllowlist,
      ips: row!.ipAllowlist,
      mapping: row!.fieldMapping,
      country: row!.defaultCountry,
    }).toEqual({
      name: 'Contact form',
      enabled: false,
      spamFilter: true,
      domains: ['example.com', '*.example.org'],
      ips: ['203.0.113.0/24'],
      mapping: { your_email: 'email', tel: 'phone_raw' },
      country: 'DE',
    })
    const refused = await client.submit(page, page, {
      name: 'Contact form',
      enabled: 'on',
      ip_allowlist: 'not-an-ip',
      field_mapping: 'x = nowhere',
    })
    expect(refused.status).toBe(400)
    const html = await refused.text()
    expect(html).toContain('/ip_allowlist/0')
    expect(html).toContain('/field_mapping/x')
    const [unchanged] = await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id))
    expect(unchanged!.ipAllowlist).toEqual(['203.0.113.0/24'])
  })

  test('create a source and regenerate its key: the URL is shown once, the old key stops', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const created = await client.submit('/app/sources', '/app/sources', { name: 'Landing page' })
    expect(created.status).toBe(201)
    const html = await created.text()
    const url = /id="webhook-url" readonly value="([^"]+)"/.exec(html)![1]!
    expect(url).toStartWith('http://lead-capture.test/api/webhook/lead/')
    const [row] = await ctx.db
      .select()
      .from(webhookSources)
      .where(eq(webhookSources.organizationId, owner.organization.id))
    expect((await client.get(`/app/sources/${row!.id}`)).text()).resolves.not.toContain(url)
    const apiKey = url.split('/').pop()!
    const inbound = (key: string) =>
      app.handle(
        request('POST', `/api/webhook/lead/${key}`, {
          json: { email: `x-${crypto.randomUUID()}@example.com` },
        }),
      )
    expect((await inbound(apiKey)).status).toBe(200)
    const rotated = await client.submit(`/app/sources/${row!.id}`, `/app/sources/${row!.id}/regenerate-key`, {
      grace_seconds: '0',
    })
    expect(rotated.status).toBe(200)
    const newUrl = /id="webhook-url" readonly value="([^"]+)"/.exec(await rotated.text())![1]!
    expect(newUrl).not.toBe(url)
    expect((await inbound(apiKey)).status).toBe(404)
    expect((await inbound(newUrl.split('/').pop()!)).status).toBe(200)
  })

  test('logs: filters, cursor paging and the body of an entry', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock)
    const client = await DashboardClient.signedIn(app, ctx, data.user.id)
    const base = `/app/sources/${data.source.id}/logs`
    const all = (await credentialFree(ctx, data.organization.id, data.source.id)).data
    const rejected = all.filter((entry) => entry.outcome === 'rejected')
    const filtered = await (await client.get(`${base}?outcome=rejected`)).text()
    for (const entry of all) {
      expect({ id: entry.id, listed: filtered.includes(`/logs/${entry.id}"`) }).toEqual({
        id: entry.id,
        listed: entry.outcome === 'rejected',
      })
    }
    const byStatus = await (await client.get(`${base}?status=413`)).text()
    expect(
      all.filter((entry) => byStatus.includes(`/logs/${entry.id}"`)).map((entry) => entry.http_status),
    ).toEqual([413])
    expect(rejected.length).toBeGreaterThan(1)
    const invalid = await client.get(`${base}?outcome=nonsense`)
    expect(invalid.status).toBe(400)
    // Paging: 50 per page; more entries than that spread over pages, none twice.
    const { sendMix: more } = await import('../helpers/delivery-traffic')
    for (let round = 0; round < 7; round++) await more(app, data.apiKey, clock)
    const seen: string[] = []
    let next: string | null = base
    while (next) {
      const page = await (await client.get(next)).text()
      seen.push(...[...page.matchAll(/\/logs\/([0-9a-f-]{36})"/g)].map((match) => match[1]!))
      next = /<a href="([^"]+cursor=[^"]+)"/.exec(page)?.[1]?.replaceAll('&amp;', '&') ?? null
    }
    const total = (await credentialFree(ctx, data.organization.id, data.source.id)).data.length
    expect(new Set(seen).size).toBe(seen.length)
    expect(seen.length).toBeGreaterThan(50)
    expect(total).toBe(50)
    const failed = all.find((entry) => entry.outcome === 'error')!
    const entry = await (await client.get(`${base}/${failed.id}`)).text()
    expect(entry).toContain('<pre class="body">')
    expect(entry).toContain('HTTP 200')
  })

  test('leads: search and a CSV export with the same filter, through the cookie', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    await createLead(ctx, owner.organization.id, { email: 'ada@acme.io', firstName: '=cmd' })
    await createLead(ctx, owner.organization.id, { email: 'bob@other.io' })
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const html = await (await client.get('/app/leads?q=acme')).text()
    expect(html).toContain('ada@acme.io')
    expect(html).not.toContain('bob@other.io')
    expect(html).toContain('href="/app/leads/export.csv?q=acme"')
    const csv = await client.get('/app/leads/export.csv?q=acme')
    expect(csv.status).toBe(200)
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8')
    expect(csv.headers.get('content-disposition')).toMatch(/^attachment; filename="leads-/)
    const records = csvRecords(await csv.text())
    expect(records.map((record) => [record.email, record.first_name])).toEqual([['ada@acme.io', "'=cmd"]])
  })

  test('tokens: created and shown once, listed masked, revoked', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const created = await client.submit('/app/tokens', '/app/tokens', {
      name: 'ci',
      scopes: ['leads.read'],
      expires_in_days: '30',
    })
    expect(created.status).toBe(201)
    const token = /id="new-token" readonly value="([^"]+)"/.exec(await created.text())![1]!
    expect(token).toStartWith('fl_pat_')
    expect((await app.handle(request('GET', '/api/v2/leads', { token }))).status).toBe(200)
    const list = await (await client.get('/app/tokens')).text()
    expect(list).not.toContain(token)
    expect(list).toContain(`${token.slice(0, 11)}`)
    const [row] = await ctx.db
      .select()
      .from(personalAccessTokens)
      .where(eq(personalAccessTokens.userId, owner.user.id))
    expect(row!.scopes).toEqual(['leads.read'])
    const revoked = await client.submit('/app/tokens', `/app/tokens/${row!.id}/revoke`)
    expect(revoked.status).toBe(200)
    expect(await revoked.text()).toContain('Token revoked.')
    expect((await app.handle(request('GET', '/api/v2/leads', { token }))).status).toBe(401)
    const unknown = await client.submit('/app/tokens', '/app/tokens', { name: 'x', scopes: 'leads.nothing' })
    expect(unknown.status).toBe(422)
  })

  test('members: an admin adds a viewer, never an owner', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const admin = await createUser(ctx, owner.organization.id, { role: 'admin' })
    const client = await DashboardClient.signedIn(app, ctx, admin.id)
    const email = `viewer-${crypto.randomUUID()}@example.com`
    const added = await client.submit('/app/members', '/app/members', {
      email,
      password: 'correct horse battery staple',
      role: 'viewer',
    })
    expect(added.status).toBe(201)
    expect(await added.text()).toContain(email)
    const [row] = await ctx.db.select().from(users).where(eq(users.email, email))
    expect(row!.role).toBe('viewer')
    const escalation = await client.submit('/app/members', '/app/members', {
      email: `o-${crypto.randomUUID()}@example.com`,
      password: 'correct horse battery staple',
      role: 'owner',
    })
    expect(escalation.status).toBe(403)
    const badEmail = await client.submit('/app/members', '/app/members', {
      email: 'not an e-mail',
      password: 'correct horse battery staple',
      role: 'viewer',
    })
    expect(badEmail.status).toBe(400)
    expect(await badEmail.text()).toContain('/email')
  })

  test('a lead: its page, edited through the form as the API validates it, deleted after a confirmation', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const lead = await createLead(ctx, owner.organization.id, {
      firstName: 'Ada',
      email: 'ada@acme.io',
      customFields: { company: 'Acme' },
    })
    await createLead(ctx, owner.organization.id, { email: 'taken@acme.io' })
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const list = await (await client.get('/app/leads')).text()
    expect(list).toContain(`<a href="/app/leads/${lead.id}">Ada</a>`)
    const page = `/app/leads/${lead.id}`
    const form = {
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'ADA@acme.io ',
      phone_raw: '+44 20 7946 0958',
      status: 'qualified',
      custom_fields: '{"company": "Engines, Ltd"}',
    }
    const saved = await client.submit(page, page, form)
    expect(saved.status).toBe(200)
    expect(await saved.text()).toContain('Lead saved.')
    const [row] = await ctx.db.select().from(leads).where(eq(leads.id, lead.id))
    expect({
      lastName: row!.lastName,
      email: row!.email,
      emailNormalized: row!.emailNormalized,
      phoneE164: row!.phoneE164,
      status: row!.status,
      customFields: row!.customFields,
    }).toEqual({
      lastName: 'Lovelace',
      email: 'ADA@acme.io',
      emailNormalized: 'ada@acme.io',
      phoneE164: '+442079460958',
      status: 'qualified',
      customFields: { company: 'Engines, Ltd' },
    })
    // Refusals come back on the page, naming the field, as the API's statuses; nothing changes.
    const refusals: Array<[Record<string, string>, number, string]> = [
      [{ email: 'not an e-mail' }, 400, '/email'],
      [{ phone_raw: '12' }, 400, '/phone_raw'],
      [{ status: 'x'.repeat(51) }, 400, '/status'],
      [{ custom_fields: '{not json' }, 400, '/custom_fields'],
      [{ custom_fields: '{"bad name!": 1}' }, 400, '/custom_fields'],
      [{ email: '', phone_raw: '' }, 400, 'at least one of a valid e-mail or phone'],
      [{ email: 'taken@acme.io' }, 409, 'already has this e-mail address'],
    ]
    for (const [change, status, named] of refusals) {
      const response = await client.submit(page, page, { ...form, ...change })
      const html = await response.text()
      expect({ change, status: response.status, named: html.includes(named) }).toEqual({
        change,
        status,
        named: true,
      })
    }
    const [unchanged] = await ctx.db.select().from(leads).where(eq(leads.id, lead.id))
    expect(unchanged!.updatedAt).toEqual(row!.updatedAt)

    const confirm = await client.get(`${page}/delete`)
    expect(confirm.status).toBe(200)
    const confirmation = await confirm.text()
    expect(confirmation).toContain(`action="/app/leads/${lead.id}/delete"`)
    expect(confirmation).toContain(`href="${page}"`)
    // Showing the confirmation deletes nothing.
    expect(await ctx.db.select().from(leads).where(eq(leads.id, lead.id))).toHaveLength(1)
    const deleted = await client.submit(`${page}/delete`, `${page}/delete`)
    expect(deleted.status).toBe(303)
    expect(deleted.headers.get('location')).toBe('/app/leads?deleted=1')
    expect(await ctx.db.select().from(leads).where(eq(leads.id, lead.id))).toHaveLength(0)
    expect(await (await client.get('/app/leads?deleted=1')).text()).toContain('Lead deleted.')
    expect((await client.get(page)).status).toBe(404)
  })

  test('a source deleted after a confirmation: its URL stops at once, its leads stay', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source, apiKey } = await createSource(ctx, owner.organization.id, { name: 'Old form' })
    const lead = await createLead(ctx, owner.organization.id, { sourceId: source.id })
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const page = await (await client.get(`/app/sources/${source.id}`)).text()
    expect(page).toContain(`href="/app/sources/${source.id}/delete"`)
    const confirmation = await (await client.get(`/app/sources/${source.id}/delete`)).text()
    expect(confirmation).toContain('Delete Old form?')
    expect(confirmation).toContain(`action="/app/sources/${source.id}/delete"`)
    const deleted = await client.submit(
      `/app/sources/${source.id}/delete`,
      `/app/sources/${source.id}/delete`,
    )
    expect(deleted.status).toBe(303)
    expect(deleted.headers.get('location')).toBe('/app/sources?deleted=1')
    expect(await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id))).toHaveLength(0)
    const inbound = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, { json: { email: 'late@example.com' } }),
    )
    expect(inbound.status).toBe(404)
    expect(await ctx.db.select().from(leads).where(eq(leads.id, lead.id))).toHaveLength(1)
    const list = await (await client.get('/app/sources?deleted=1')).text()
    expect(list).toContain('Source deleted.')
    expect(list).not.toContain('Old form')
  })

  test('members: role changes and removals under the API rules (rank, last owner), each named on the page', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const admin = await createUser(ctx, owner.organization.id, { role: 'admin' })
    const viewer = await createUser(ctx, owner.organization.id, { role: 'viewer' })
    const viewerSession = await createSession(ctx, viewer.id)
    const asAdmin = await DashboardClient.signedIn(app, ctx, admin.id)
    const members = await (await asAdmin.get('/app/members')).text()
    // Controls for the admin's equals and those below; none for the owner.
    expect(members).toContain(`action="/app/members/${viewer.id}/role"`)
    expect(members).toContain(`action="/app/members/${admin.id}/role"`)
    expect(members).not.toContain(`action="/app/members/${owner.user.id}/role"`)
    expect(members).toContain(
      `<label for="role-${viewer.id}" class="visually-hidden">Role of ${viewer.email}</label>`,
    )

    const promoted = await asAdmin.submit('/app/members', `/app/members/${viewer.id}/role`, {
      role: 'member',
    })
    expect(promoted.status).toBe(200)
    expect(await promoted.text()).toContain(`${viewer.email} is now member.`)
    const roleOf = async (id: string) => (await ctx.db.select().from(users).where(eq(users.id, id)))[0]?.role
    expect(await roleOf(viewer.id)).toBe('member')
    const refusals: Array<[string, Record<string, string>, number]> = [
      [`/app/members/${viewer.id}/role`, { role: 'owner' }, 403],
      [`/app/members/${owner.user.id}/role`, { role: 'viewer' }, 403],
      [`/app/members/${owner.user.id}/remove`, {}, 403],
      [`/app/members/${viewer.id}/role`, { role: 'superuser' }, 400],
    ]
    for (const [path, form, status] of refusals) {
      const response = await asAdmin.submit('/app/members', path, form)
      expect({ path, form, status: response.status }).toEqual({ path, form, status })
      expect(await response.text()).toContain('role="alert"')
    }
    expect(await roleOf(owner.user.id)).toBe('owner')
    // The last owner stays.
    const asOwner = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const demoted = await asOwner.submit('/app/members', `/app/members/${owner.user.id}/role`, {
      role: 'admin',
    })
    expect(demoted.status).toBe(409)
    expect(await demoted.text()).toContain('at least one owner')

    const confirmation = await (await asAdmin.get(`/app/members/${viewer.id}/remove`)).text()
    expect(confirmation).toContain(`Remove ${viewer.email}?`)
    expect(await roleOf(viewer.id)).toBe('member')
    const removed = await asAdmin.submit(
      `/app/members/${viewer.id}/remove`,
      `/app/members/${viewer.id}/remove`,
    )
    expect(removed.status).toBe(200)
    expect(await removed.text()).toContain(`${viewer.email} removed.`)
    expect(await roleOf(viewer.id)).toBeUndefined()
    // Their session stops at once, in the API as on /app.
    expect((await app.handle(request('GET', '/api/auth/me', { token: viewerSession }))).status).toBe(401)
  })

  test('assets are served from the pinned packages, with an ETag; pages load nothing from elsewhere', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const html = await (await client.get('/app/sources')).text()
    const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!)
    expect(urls.filter((url) => /^(https?:)?\/\//.test(url))).toEqual([])
    for (const file of [
      'htmx.min.js',
      'uPlot.iife.min.js',
      'uPlot.min.css',
      'dashboard.js',
      'dashboard.css',
    ]) {
      const response = await app.handle(request('GET', `/app/assets/${file}`))
      expect({ file, status: response.status }).toEqual({ file, status: 200 })
      expect(response.headers.get('content-type')).toMatch(
        file.endsWith('.css') ? /^text\/css/ : /^text\/javascript/,
      )
      const etag = response.headers.get('etag')!
      expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(500)
      const again = await app.handle(
        request('GET', `/app/assets/${file}`, { headers: { 'if-none-match': etag } }),
      )
      expect(again.status).toBe(304)
    }
    expect((await app.handle(request('GET', '/app/assets/../../package.json'))).status).toBe(404)
    expect((await app.handle(request('GET', '/app/assets/secrets.ts'))).status).toBe(404)
  })

  test('errors on dashboard paths are HTML pages with the status; the API keeps its JSON', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const client = await DashboardClient.signedIn(app, ctx, owner.user.id)
    const cases: Array<[string, number]> = [
      ['/app/no-such-page', 404],
      ['/app/sources/x/y/z', 404],
      ['/app/leads?q=' + 'x'.repeat(400), 400],
    ]
    for (const [path, status] of cases) {
      const response = await client.get(path)
      expect({ path, status: response.status }).toEqual({ path, status })
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(response.headers.get('x-request-id')).toBeTruthy()
      expect(await response.text()).toContain('role="alert"')
    }
    const api = await app.handle(request('GET', '/api/no-such-route'))
    expect(api.status).toBe(404)
    expect((await api.json()).error).toBe('not_found')
  })

  test('unstorable text in any form field is a 400 page, never a 5xx', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app, ctx } = await makeTestApp({ clock })
    const data = await organizationWithData(ctx, app, clock)
    const client = await DashboardClient.signedIn(app, ctx, data.user.id)
    for (const page of PAGES.filter((entry) => entry.method === 'POST')) {
      const form = { name: 'x', ...page.form?.(data) }
      for (const field of Object.keys(form)) {
        // (A lone surrogate cannot travel in a form: the browser encodes it as U+FFFD.)
        for (const hostile of ['a\u0000b', '\u0000']) {
          const response = await client.submit('/app/tokens', page.path(data), { ...form, [field]: hostile })
          const label = `${page.path(data)} ${field}`
          expect({ label, status: response.status }).toEqual({ label, status: 400 })
          expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
        }
      }
    }
  })

  test('no /app route is in the OpenAPI document', async () => {
    const { app } = await makeTestApp()
    const spec = await (await app.handle(request('GET', '/swagger/json'))).json()
    expect(Object.keys(spec.paths).filter((path) => path === '/' || path.startsWith('/app'))).toEqual([])
  })
})
