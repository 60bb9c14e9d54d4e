import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { NormalizedLead } from '../../src/modules/inbound/normalize'
import { type IngestItem, ingestItem } from '../../src/modules/inbound/repository'
import { createLead, createOrganization, createSource, createWebhookEndpoint } from '../helpers/factories'
import { email, requestFacts } from '../helpers/inbound'
import { makeTestApp } from '../helpers/test-app'

// ingest_leads() writes a group of one item by a path of its own (scalar statements; the common
// case at moderate rates), and every larger group by the set-based statements
// (drizzle/functions/ingest_leads.sql). The two must be one rule: for every state a person's
// submission can meet (the key's window, an existing lead by e-mail or phone, the organization's
// endpoints, a deleted source), the same item written alone and written in a group of two give the
// same row back and leave the same lead, delivery-log entry, window and webhook event behind.

type Match = 'none' | 'email' | 'phone' | 'both' | 'phone twice'
type Endpoint = 'none' | 'enabled' | 'updates only' | 'other source' | 'disabled'
type Contact = 'email' | 'phone' | 'both'

interface Case {
  name: string
  /** The key's counted requests, in seconds relative to the item's received_at (any order). */
  window: number[]
  match: Match
  endpoint: Endpoint
  contact: Contact
  sourceDeleted: boolean
  /** The request's body was cut at the size limit; the lead has no name or status. */
  sparse?: boolean
}

const base: Omit<Case, 'name'> = {
  window: [],
  match: 'none',
  endpoint: 'none',
  contact: 'email',
  sourceDeleted: false,
}
const full = (expiredToo: number) => [
  ...Array.from({ length: expiredToo }, (_, i) => -61 - i),
  ...Array.from({ length: 60 }, (_, i) => -59 + i * 0.5),
]

// Named cases: every branch of the one-item path (and every fall-through to the set statement).
const cases: Case[] = [
  { ...base, name: 'a new lead, no endpoint: created by the one-item path' },
  { ...base, name: 'a new lead by phone only', contact: 'phone' },
  { ...base, name: 'a new lead with both keys', contact: 'both' },
  { ...base, name: 'the first request of its key: an empty window', window: [] },
  { ...base, name: 'hits that left the window are dropped', window: [-120, -60, -59.9, -10, -1] },
  {
    ...base,
    name: 'a later hit committed first by another replica: the time goes in its place',
    window: [-5, 3],
  },
  { ...base, name: '59 counted: the 60th passes', window: full(0).slice(1) },
  { ...base, name: '60 counted: refused, nothing written', window: full(0) },
  { ...base, name: '60 counted after expired ones: refused', window: full(5) },
  { ...base, name: 'refused while an endpoint is enabled', window: full(0), endpoint: 'enabled' },
  { ...base, name: 'an existing lead by e-mail: updated', match: 'email' },
  { ...base, name: 'an existing lead by phone: updated', match: 'phone', contact: 'both' },
  { ...base, name: 'two existing leads, one by each key: the e-mail wins', match: 'both', contact: 'both' },
  { ...base, name: 'two existing leads with the phone: the oldest', match: 'phone twice', contact: 'phone' },
  { ...base, name: 'a cut body, no name or status', sparse: true },
  { ...base, name: 'a cut body merged into an existing lead', sparse: true, match: 'email' },
  { ...base, name: 'an enabled endpoint: created with its event', endpoint: 'enabled' },
  { ...base, name: 'an endpoint for updates only: created, no event', endpoint: 'updates only' },
  { ...base, name: 'an endpoint for another source: no event', endpoint: 'other source' },
  { ...base, name: 'a disabled endpoint: no event', endpoint: 'disabled' },
  { ...base, name: 'an update with an endpoint', match: 'email', endpoint: 'enabled' },
  { ...base, name: 'a deleted source: no row, nothing written', sourceDeleted: true },
]

interface World {
  organizationId: string
  sourceId: string
  item: IngestItem
  /** The person's keys, which differ between worlds: observe() names them. */
  address: string
  phone: string
}

const { ctx, services } = await makeTestApp()

/** An organization and a source in the case's state, and the item it receives. */
async function world(scenario: Omit<Case, 'name'>, receivedAt: Date): Promise<World> {
  const organization = await createOrganization(ctx)
  const { source } = await createSource(ctx, organization.id)
  const address = email()
  const phone = `+4420${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`
  const lead: NormalizedLead = {
    firstName: scenario.sparse ? null : 'Ada',
    lastName: null,
    email: scenario.contact === 'phone' ? null : address,
    emailNormalized: scenario.contact === 'phone' ? null : address,
    phoneRaw: scenario.contact === 'email' ? null : phone,
    phoneE164: scenario.contact === 'email' ? null : phone,
    status: scenario.sparse ? null : 'new',
    customFields: { plan: 'pro', seats: 3 },
    attribution: { utm_source: 'ads' },
    signals: {},
  }
  const earlier = new Date(receivedAt.getTime() - 3_600_000)
  const phoneLeads =
    scenario.match === 'phone twice' ? 2 : scenario.match === 'phone' || scenario.match === 'both' ? 1 : 0
  for (let index = 0; index < phoneLeads; index++) {
    // the oldest of several with the phone is the match (ids are UUIDv7: in creation order)
    await createLead(ctx, organization.id, {
      email: null,
      phoneE164: phone,
      phoneRaw: phone,
      lastName: index === 0 ? 'Lovelace' : 'Byron',
      customFields: { seats: 1, region: 'eu' },
      createdAt: earlier,
    })
  }
  if (scenario.match === 'email' || scenario.match === 'both') {
    await createLead(ctx, organization.id, {
      email: address,
      status: 'contacted',
      customFields: { seats: 2 },
      createdAt: earlier,
    })
  }
  if (scenario.endpoint !== 'none') {
    const endpointBody = {
      enabled: { event_types: ['lead.created', 'lead.updated'] },
      'updates only': { event_types: ['lead.updated'] },
      'other source': { source_ids: [(await createSource(ctx, organization.id)).source.id] },
      disabled: { enabled: false },
    } as const
    await createWebhookEndpoint(services, organization.id, endpointBody[scenario.endpoint] as never)
  }
  if (scenario.window.length > 0) {
    const hits = [...scenario.window]
      .sort((a, b) => a - b)
      .map((seconds) => new Date(receivedAt.getTime() + seconds * 1000).toISOString())
    await ctx.database.query(
      'insert into inbound_rate_windows (source_id, hits) values ($1, $2::timestamptz[])',
      [source.id, `{${hits.map((hit) => `"${hit}"`).join(',')}}`],
    )
  }
  const item = ingestItem({ id: source.id, organizationId: organization.id }, lead, {
    ...requestFacts(),
    receivedAt,
    origin: 'https://forms.example.com',
    userAgent: 'test',
    body: JSON.stringify({ email: address }),
    bodyBytes: 40,
    bodyTruncated: scenario.sparse ?? false,
  })
  if (scenario.sourceDeleted) {
    await ctx.database.query('delete from webhook_sources where id = $1', [source.id])
  }
  return { organizationId: organization.id, sourceId: source.id, item, address, phone }
}

type Row = {
  idx: number
  lead_id: string | null
  outcome: string
  webhook_events: boolean
  remaining: number
  reset_ms: number
}

const ingest = (items: IngestItem[]) =>
  ctx.database.query<Row>('select * from ingest_leads($1::jsonb)', [JSON.stringify(items)])

/** What an ingest left behind, with ids and times made relative so two worlds compare. */
async function observe(world: World, rows: Row[]) {
  const { item } = world
  const received = new Date(item.received_at).getTime()
  const row = rows.find((candidate) => candidate.idx === item.idx)
  const [window] = await ctx.database.query<{ hits: string[] | null }>(
    'select array(select extract(epoch from h)::float8::text from unnest(hits) h) as hits from inbound_rate_windows where source_id = $1',
    [world.sourceId],
  )
  const leadRows = await ctx.database.query<Record<string, unknown>>(
    `select id, first_name, last_name, email, email_normalized, phone_raw, phone_e164, status, custom_fields,
       attribution, source_id = $2 as from_this_source, extract(epoch from created_at) * 1000 as created_ms,
       extract(epoch from updated_at) * 1000 as updated_ms
     from leads where organization_id = $1 order by created_at, email nulls first, id`,
    [world.organizationId, world.sourceId],
  )
  const logRows = await ctx.database.query<Record<string, unknown>>(
    `select id, lead_id, method, http_status, outcome, reason, client_ip, origin, user_agent, body_bytes, body,
       body_truncated, spam_reasons, repeat_count, duration_ms >= $2 as duration_counted,
       extract(epoch from received_at) * 1000 as received_ms
     from delivery_logs where source_id = $1`,
    [world.sourceId, item.duration_ms],
  )
  const queued = await ctx.database.query<{ n: number }>(
    'select count(*)::int as n from webhook_fan_out_queue where id = $1',
    [item.log_id],
  )
  const messages = await ctx.database.query<Record<string, unknown>>(
    `select event_type, lead_first_name, lead_last_name, lead_email, lead_phone_e164, lead_status,
       lead_custom_fields, lead_attribution from webhook_messages where id = $1`,
    [item.log_id],
  )
  const name = (id: unknown) => (id === item.log_id ? 'its own id' : id === null ? null : 'an existing lead')
  const keys = (row: Record<string, unknown>) =>
    JSON.parse(JSON.stringify(row).replaceAll(world.address, '<address>').replaceAll(world.phone, '<phone>'))
  return {
    row: row && { ...row, idx: undefined, lead_id: name(row.lead_id) },
    rowCount: rows.filter((candidate) => candidate.idx === item.idx).length,
    window: (window?.hits ?? []).map((seconds) => Math.round(Number(seconds) * 1000 - received)),
    leads: leadRows.map(({ id, created_ms, updated_ms, ...rest }) => ({
      ...keys(rest),
      id: name(id),
      created_ms: Math.round(Number(created_ms) - received),
      updated_ms: Math.round(Number(updated_ms) - received),
    })),
    logs: logRows.map(({ id, lead_id, received_ms, ...rest }) => ({
      ...keys(rest),
      id: name(id),
      lead_id: name(lead_id),
      received_ms: Math.round(Number(received_ms) - received),
    })),
    queued: queued[0]?.n,
    messages: messages.map(keys),
  }
}

/** The item written alone (the one-item path) and in a group of two (the set statement). */
async function bothPaths(scenario: Omit<Case, 'name'>) {
  const receivedAt = new Date(Math.floor(Date.now() / 1000) * 1000)
  const alone = await world(scenario, receivedAt)
  const grouped = await world(scenario, receivedAt)
  // The other item of the group: another organization (no endpoint, no shared key), another source.
  const other = await world(base, receivedAt)
  const aloneRows = await ingest([alone.item])
  grouped.item.idx = 1
  const groupRows = await ingest([{ ...other.item, idx: 0 }, grouped.item])
  return {
    alone: await observe(alone, aloneRows),
    grouped: await observe(grouped, groupRows),
    otherRow: groupRows.find((row) => row.idx === 0),
  }
}

describe('ingest_leads(): a group of one item and a larger group follow one rule', () => {
  test.each(cases.map((scenario) => [scenario.name, scenario] as const))('%s', async (_name, scenario) => {
    const { alone, grouped, otherRow } = await bothPaths(scenario)
    expect(alone).toEqual(grouped)
    expect(otherRow?.outcome).toBe('created')
    // And what each case means, so the two paths cannot agree on a wrong answer.
    if (scenario.sourceDeleted) {
      expect(alone.rowCount).toBe(0)
      expect(alone.logs).toEqual([])
      return
    }
    const counted = scenario.window.filter((seconds) => seconds > -60).length
    if (counted >= 60) {
      expect(alone.row).toMatchObject({ outcome: 'rate_limited', lead_id: null, remaining: 0 })
      expect(alone.row?.reset_ms).toBe(
        Math.round((Math.min(...scenario.window.filter((s) => s > -60)) + 60) * 1000),
      )
      // refused: the window is not rewritten, its expired hits included
      expect(alone.window).toEqual(
        [...scenario.window].sort((a, b) => a - b).map((seconds) => seconds * 1000),
      )
      expect(alone.logs).toEqual([])
      return
    }
    const updated = scenario.match !== 'none'
    expect(alone.row).toMatchObject({
      outcome: updated ? 'updated' : 'created',
      lead_id: updated ? 'an existing lead' : 'its own id',
      remaining: 59 - counted,
      webhook_events: scenario.endpoint !== 'none' && scenario.endpoint !== 'disabled',
    })
    expect(alone.window).toEqual(
      [...scenario.window.filter((seconds) => seconds > -60).map((seconds) => seconds * 1000), 0].sort(
        (a, b) => a - b,
      ),
    )
    expect(alone.logs).toMatchObject([
      { outcome: updated ? 'updated' : 'created', http_status: 200, method: 'POST', duration_counted: true },
    ])
    const eventExpected = scenario.endpoint === 'enabled' || (scenario.endpoint === 'updates only' && updated)
    if (scenario.match === 'phone twice') {
      expect(alone.leads.map((lead) => [lead.last_name, lead.updated_ms])).toEqual([
        ['Lovelace', 0],
        ['Byron', -3_600_000],
      ])
    }
    // an event is queued by its id; an updated lead's message is written with it (a created lead's by the worker)
    expect(alone.queued).toBe(eventExpected ? 1 : 0)
    expect(alone.messages).toHaveLength(eventExpected && updated ? 1 : 0)
  })

  test('random windows, matches and endpoints: the same rows and state by both paths', async () => {
    const offset = fc
      .double({ min: -90, max: 5, noNaN: true })
      .map((seconds) => Math.round(seconds * 1000) / 1000)
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          window: fc.oneof(
            fc.array(offset, { maxLength: 12 }),
            fc.array(offset, { minLength: 55, maxLength: 70 }),
          ),
          match: fc.constantFrom<Match>('none', 'email', 'phone', 'both', 'phone twice'),
          endpoint: fc.constantFrom<Endpoint>('none', 'enabled', 'updates only', 'other source', 'disabled'),
          contact: fc.constantFrom<Contact>('email', 'phone', 'both'),
          sourceDeleted: fc.boolean(),
          sparse: fc.boolean(),
        }),
        async (scenario) => {
          const { alone, grouped } = await bothPaths(scenario)
          expect(alone).toEqual(grouped)
        },
      ),
      { numRuns: 40 },
    )
  })
})
