import { describe, expect, test } from 'bun:test'
import { and, desc, eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { deliveryLogs, leads, webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { generateSecret } from '../../src/lib/secrets'
import { SourceGoneError } from '../../src/modules/inbound/repository'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSource } from '../helpers/factories'
import { makeTestApp, request } from '../helpers/test-app'

type App = Awaited<ReturnType<typeof makeTestApp>>['app']

async function setup(sourceOptions: Parameters<typeof createSource>[2] = {}, appOptions = {}) {
  const { app, ctx, services } = await makeTestApp(appOptions)
  const organization = await createOrganization(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, sourceOptions)
  return { app, ctx, services, organization, source, apiKey }
}

const post = (app: App, apiKey: string, json: unknown, headers: Record<string, string> = {}) =>
  app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { json, headers }))

const email = () => uniqueEmail('lead')

/** A lead as the inbound pipeline hands it to the repository. */
function leadWithEmail(address: string) {
  return {
    firstName: null,
    lastName: null,
    email: address,
    emailNormalized: address,
    phoneRaw: null,
    phoneE164: null,
    status: null,
    customFields: {},
    attribution: {},
    signals: {},
  }
}

function requestFacts() {
  return {
    receivedAt: new Date(),
    clientIp: '127.0.0.1',
    origin: null,
    userAgent: null,
    bodyBytes: 2,
    body: '{}',
    bodyTruncated: false,
    durationMs: 1,
  }
}

async function logsOf(ctx: AppContext, sourceId: string) {
  return ctx.db
    .select()
    .from(deliveryLogs)
    .where(eq(deliveryLogs.sourceId, sourceId))
    .orderBy(desc(deliveryLogs.id))
}

describe('POST /api/webhook/lead/{api_key}: outcomes', () => {
  test('created: 200 with lead_id; the lead and its delivery log are stored', async () => {
    const { app, ctx, source, apiKey, organization } = await setup()
    const address = email()
    const response = await post(app, apiKey, {
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: address,
      phone_raw: '+44 20 7946 0958',
      status: 'new',
      company: 'Engines',
    })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('application/json')
    expect(response.headers.get('x-ratelimit-limit')).toBe('60')
    expect(response.headers.get('x-ratelimit-remaining')).toBe('59')
    expect(response.headers.get('x-ratelimit-reset')).toBe('60')
    const body = await response.json()
    expect(body).toEqual({ status: 'created', success: true, lead_id: expect.any(String) })
    const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, body.lead_id))
    expect(lead).toMatchObject({
      organizationId: organization.id,
      sourceId: source.id,
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: address,
      emailNormalized: address,
      phoneRaw: '+44 20 7946 0958',
      phoneE164: '+442079460958',
      status: 'new',
      customFields: { company: 'Engines' },
    })
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({
      method: 'POST',
      httpStatus: 200,
      outcome: 'created',
      leadId: body.lead_id,
      repeatCount: 1,
    })
    expect(log!.bodyBytes).toBeGreaterThan(0)
    expect(JSON.parse(log!.body!).email).toBe(address)
  })

  test('the same e-mail in another case is updated, with the same lead_id; empty fields are filled', async () => {
    const { app, ctx, apiKey } = await setup()
    const address = email()
    const first = await (await post(app, apiKey, { email: address, status: 'new' })).json()
    const second = await post(app, apiKey, {
      email: `  ${address.toUpperCase()} `,
      first_name: 'Grace',
      status: 'contacted',
      source_campaign: 'spring',
    })
    expect(second.status).toBe(200)
    expect(await second.json()).toEqual({ status: 'updated', success: true, lead_id: first.lead_id })
    const rows = await ctx.db.select().from(leads).where(eq(leads.id, first.lead_id))
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({
      firstName: 'Grace',
      status: 'contacted',
      customFields: { source_campaign: 'spring' },
    })
    expect(rows[0]!.email).toBe(address)
  })

  test('the same phone in another format is updated, using the source default country', async () => {
    const { app, apiKey } = await setup({ defaultCountry: 'US' })
    const first = await (await post(app, apiKey, { phone_raw: '(415) 555-2671' })).json()
    expect(first.status).toBe('created')
    const second = await (await post(app, apiKey, { phone_raw: '+1 415-555-2671' })).json()
    expect(second).toEqual({ status: 'updated', success: true, lead_id: first.lead_id })
    const third = await (await post(app, apiKey, { phone_raw: '4155552671', first_name: 'Jo' })).json()
    expect(third.lead_id).toBe(first.lead_id)
  })

  test('dedup is per organization: the same e-mail in another organization creates', async () => {
    const a = await setup()
    const address = email()
    const first = await (await post(a.app, a.apiKey, { email: address })).json()
    const otherOrganization = await createOrganization(a.ctx)
    const other = await createSource(a.ctx, otherOrganization.id)
    const second = await (await post(a.app, other.apiKey, { email: address })).json()
    expect(second.status).toBe('created')
    expect(second.lead_id).not.toBe(first.lead_id)
  })

  test('50 concurrent identical posts give 1 created, 49 updated and one row', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const address = email()
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => post(app, apiKey, { email: address, phone_raw: '+14155552671' })),
    )
    const bodies = await Promise.all(responses.map((response) => response.json()))
    expect(responses.every((response) => response.status === 200)).toBe(true)
    expect(bodies.filter((body) => body.status === 'created')).toHaveLength(1)
    expect(bodies.filter((body) => body.status === 'updated')).toHaveLength(49)
    expect(new Set(bodies.map((body) => body.lead_id)).size).toBe(1)
    const rows = await ctx.db
      .select()
      .from(leads)
      .where(and(eq(leads.organizationId, organization.id), eq(leads.emailNormalized, address)))
    expect(rows).toHaveLength(1)
  })

  test('concurrent leads over HTTP are each answered after commit, all stored', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const other = await createSource(ctx, organization.id)
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        post(app, index % 2 ? apiKey : other.apiKey, { email: email() }),
      ),
    )
    const bodies = await Promise.all(responses.map((response) => response.json()))
    expect(bodies.every((body) => body.status === 'created')).toBe(true)
    expect(new Set(bodies.map((body) => body.lead_id)).size).toBe(40)
    const stored = await ctx.db.select().from(leads).where(eq(leads.organizationId, organization.id))
    expect(stored.map((lead) => lead.id).sort()).toEqual(bodies.map((body) => body.lead_id).sort())
  })

  test('leads queued in the same turn are written by one statement (group commit)', async () => {
    const { ctx, services, organization, source } = await setup()
    const repository = services.inbound.repository
    const before = { ...repository.stats }
    const results = await Promise.all(
      Array.from({ length: 10 }, () => repository.ingest(source, leadWithEmail(email()), requestFacts())),
    )
    expect(repository.stats.groups - before.groups).toBe(1)
    expect(repository.stats.groupedLeads - before.groupedLeads).toBe(10)
    expect(repository.stats.singles).toBe(before.singles)
    expect(results.every((result) => result.outcome === 'created')).toBe(true)
    const stored = await ctx.db.select().from(leads).where(eq(leads.organizationId, organization.id))
    expect(stored).toHaveLength(10)
    const logged = await logsOf(ctx, source.id)
    expect(logged.map((log) => log.leadId).sort()).toEqual(results.map((result) => result.leadId).sort())
  })

  test('submissions of one person queued in the same turn go in different groups: 1 created, 1 updated', async () => {
    const { ctx, services, organization, source } = await setup()
    const repository = services.inbound.repository
    const before = { ...repository.stats }
    const address = email()
    const phone = { ...leadWithEmail(email()), phoneRaw: '+44 20 7946 0001', phoneE164: '+442079460001' }
    const results = await Promise.all([
      repository.ingest(source, leadWithEmail(address), requestFacts()),
      repository.ingest(source, leadWithEmail(email()), requestFacts()),
      repository.ingest(source, { ...leadWithEmail(address), status: 'second' }, requestFacts()),
      repository.ingest(source, phone, requestFacts()),
      repository.ingest(source, { ...phone, email: null, emailNormalized: null }, requestFacts()),
    ])
    expect(results.map((result) => result.outcome)).toEqual([
      'created',
      'created',
      'updated',
      'created',
      'updated',
    ])
    expect(results[2]!.leadId).toBe(results[0]!.leadId)
    expect(results[4]!.leadId).toBe(results[3]!.leadId)
    // The first group took one submission of each person; the repeats followed in a second group.
    expect(repository.stats.groups - before.groups).toBe(2)
    expect(repository.stats.groupedLeads - before.groupedLeads).toBe(5)
    expect(repository.stats.singles - before.singles).toBe(0)
    expect(repository.stats.groupFallbacks).toBe(before.groupFallbacks)
    const stored = await ctx.db.select().from(leads).where(eq(leads.organizationId, organization.id))
    expect(stored).toHaveLength(3)
    expect(stored.find((lead) => lead.id === results[0]!.leadId)?.status).toBe('second')
  })

  test('one group: submissions that reach one lead by e-mail and by phone are both merged into it', async () => {
    const { ctx, services, organization, source } = await setup()
    const repository = services.inbound.repository
    const address = email()
    const [first] = await Promise.all([
      repository.ingest(
        source,
        { ...leadWithEmail(address), phoneRaw: '+44 20 7946 0002', phoneE164: '+442079460002' },
        requestFacts(),
      ),
    ])
    const before = { ...repository.stats }
    const results = await Promise.all([
      repository.ingest(
        source,
        {
          ...leadWithEmail(address),
          firstName: 'Ada',
          status: 'contacted',
          customFields: { plan: 'basic', seats: 1 },
        },
        requestFacts(),
      ),
      repository.ingest(
        source,
        {
          ...leadWithEmail(email()),
          email: null,
          emailNormalized: null,
          phoneRaw: '020 7946 0002',
          phoneE164: '+442079460002',
          lastName: 'Lovelace',
          status: 'won',
          customFields: { plan: 'pro' },
          attribution: { utm_source: 'ads' },
        },
        requestFacts(),
      ),
    ])
    expect(repository.stats.groups - before.groups).toBe(1)
    expect(results).toEqual([
      { leadId: first!.leadId, outcome: 'updated' },
      { leadId: first!.leadId, outcome: 'updated' },
    ])
    const [lead, ...others] = await ctx.db
      .select()
      .from(leads)
      .where(eq(leads.organizationId, organization.id))
    expect(others).toHaveLength(0)
    expect(lead).toMatchObject({
      id: first!.leadId,
      firstName: 'Ada',
      lastName: 'Lovelace',
      emailNormalized: address,
      phoneE164: '+442079460002',
      status: 'won',
      customFields: { plan: 'pro', seats: 1 },
      attribution: { utm_source: 'ads' },
    })
    const logged = await logsOf(ctx, source.id)
    expect(logged.filter((log) => log.outcome === 'updated').map((log) => log.leadId)).toEqual([
      first!.leadId,
      first!.leadId,
    ])
  })

  test('ingest_leads refuses a group whose items share a dedup key, and writes nothing', async () => {
    const { ctx, organization, source } = await setup()
    const address = email()
    const item = (idx: number) => ({
      idx,
      organization_id: organization.id,
      source_id: source.id,
      new_lead_id: crypto.randomUUID(),
      log_id: crypto.randomUUID(),
      email: address,
      email_normalized: address,
      custom_fields: {},
      attribution: {},
      received_at: new Date().toISOString(),
      client_ip: '127.0.0.1',
      body_bytes: 2,
      body_truncated: false,
      duration_ms: 1,
    })
    const refused = await ctx.database
      .query('select * from ingest_leads($1::jsonb)', [JSON.stringify([item(0), item(1)])])
      .catch((error: { code?: string; message: string }) => error)
    expect(refused).toMatchObject({ code: 'LC409', message: 'two items of one group share a dedup key' })
    expect(await ctx.db.select().from(leads).where(eq(leads.organizationId, organization.id))).toHaveLength(0)
    expect(await logsOf(ctx, source.id)).toHaveLength(0)
  })

  test('a source deleted after the request found it: its lead is refused (404), the rest of its group is stored', async () => {
    const { app, ctx, services, organization, source, apiKey } = await setup()
    const doomed = await createSource(ctx, organization.id)
    // Warm the cache, then delete the source behind its back (no announcement reaches the cache).
    expect((await post(app, doomed.apiKey, { email: email() })).status).toBe(200)
    await ctx.database.query('delete from webhook_sources where id = $1', [doomed.source.id])

    // Leads queued in the same turn form one group; the one for the deleted source gets no row back.
    const repository = services.inbound.repository
    const fallbacksBefore = repository.stats.groupFallbacks
    const addresses = Array.from({ length: 5 }, () => email())
    const results = await Promise.allSettled(
      addresses.map((address, index) =>
        repository.ingest(index === 2 ? doomed.source : source, leadWithEmail(address), requestFacts()),
      ),
    )
    expect(repository.stats.groupFallbacks).toBe(fallbacksBefore)
    expect(results.map((result) => result.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ])
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(SourceGoneError)
    const stored = await ctx.db.select().from(leads).where(eq(leads.sourceId, source.id))
    expect(stored.map((lead) => lead.emailNormalized).sort()).toEqual(
      addresses.filter((_, index) => index !== 2).sort(),
    )
    expect(await logsOf(ctx, doomed.source.id)).toEqual([])

    // Through HTTP the deleted source is a 404 with the webhook body, and stays one.
    const response = await post(app, doomed.apiKey, { email: email() })
    expect(response.status).toBe(404)
    expect((await response.json()).error).toBe('webhook_not_found')
    expect((await post(app, doomed.apiKey, { email: email() })).status).toBe(404)
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
  })

  test('a rejection logged for a source deleted meanwhile is dropped, not left without its source', async () => {
    const { ctx, services, organization } = await setup()
    const doomed = await createSource(ctx, organization.id)
    const kept = await createSource(ctx, organization.id)
    await ctx.database.query('delete from webhook_sources where id = $1', [doomed.source.id])
    const entry = (sourceId: string) => ({
      sourceId,
      organizationId: organization.id,
      ...requestFacts(),
      method: 'POST',
      httpStatus: 429,
      outcome: 'rejected' as const,
      reason: 'rate_limited',
      spamReasons: [],
      repeatCount: 3,
    })
    await services.inbound.repository.insertLogs([entry(doomed.source.id), entry(kept.source.id)])
    expect(await logsOf(ctx, doomed.source.id)).toEqual([])
    const [log] = await logsOf(ctx, kept.source.id)
    expect(log).toMatchObject({
      outcome: 'rejected',
      httpStatus: 429,
      reason: 'rate_limited',
      repeatCount: 3,
    })
  })

  test('error: neither a valid e-mail nor phone → 200 with success false, logged, nothing stored', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const response = await post(app, apiKey, { first_name: 'Nobody', email: 'not-an-email', phone_raw: '12' })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      status: 'error',
      success: false,
      error: 'missing_contact',
      message: expect.stringContaining('email'),
    })
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({ outcome: 'error', reason: 'missing_contact', httpStatus: 200, leadId: null })
    expect(await ctx.db.select().from(leads).where(eq(leads.sourceId, source.id))).toHaveLength(0)
  })

  test('spam rules: honeypot, link in a name, disposable domain, too fast; reasons are logged', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ email: email(), _gotcha: 'filled by a bot' }, 'honeypot_filled:_gotcha'],
      [{ email: email(), _hp: 'x' }, 'honeypot_filled:_hp'],
      [{ email: email(), first_name: 'Buy now https://spam.example' }, 'link_in_name'],
      [{ email: uniqueEmail('x', 'mailinator.com') }, 'disposable_email_domain'],
      [{ email: email(), _elapsed_ms: 300 }, 'submitted_too_fast'],
    ]
    for (const [body, reason] of cases) {
      const response = await post(app, apiKey, body)
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ status: 'spam', success: true })
      const [log] = await logsOf(ctx, source.id)
      expect(log).toMatchObject({ outcome: 'spam', reason, spamReasons: [reason] })
    }
    expect(await ctx.db.select().from(leads).where(eq(leads.sourceId, source.id))).toHaveLength(0)
    // A human-paced submission passes, and underscore fields are not stored.
    const human = await (await post(app, apiKey, { email: email(), _elapsed_ms: 4200, _gotcha: '' })).json()
    expect(human.status).toBe('created')
    const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, human.lead_id))
    expect(lead!.customFields).toEqual({})
  })

  test('with the spam filter off, the same submission is a lead', async () => {
    const { app, apiKey } = await setup({ spamFilter: false })
    const body = await (await post(app, apiKey, { email: email(), _elapsed_ms: 10, _gotcha: 'x' })).json()
    expect(body.status).toBe('created')
  })

  test('field mapping, full name and custom fields', async () => {
    const { app, ctx, apiKey } = await setup({
      fieldMapping: { 'your-email': 'email', name: 'full_name', tel: 'phone_raw', plan: 'custom.plan_name' },
      defaultCountry: 'GB',
    })
    const address = email()
    const body = await (
      await post(app, apiKey, {
        'your-email': address,
        name: 'Charles Babbage Jr',
        tel: '020 7946 0958',
        plan: 'gold',
        newsletter: true,
        page_url: 'https://example.com/contact',
        attribution: { first_touch: { utm_source: 'news' } },
      })
    ).json()
    expect(body.status).toBe('created')
    const [lead] = await ctx.db.select().from(leads).where(eq(leads.id, body.lead_id))
    expect(lead).toMatchObject({
      email: address,
      firstName: 'Charles',
      lastName: 'Babbage Jr',
      phoneE164: '+442079460958',
      customFields: { plan_name: 'gold', newsletter: true },
      attribution: { first_touch: { utm_source: 'news' }, page_url: 'https://example.com/contact' },
    })
  })
})

describe('POST /api/webhook/lead/{api_key}: refusals', () => {
  test('unknown, disabled, malformed and bad-checksum keys are all the same 404', async () => {
    const { app, ctx, organization, apiKey } = await setup()
    const disabled = await createSource(ctx, organization.id, { enabled: false })
    const badChecksum = apiKey.slice(0, -1) + (apiKey.endsWith('A') ? 'B' : 'A')
    const bodies = []
    for (const key of [
      generateSecret('source_key'),
      disabled.apiKey,
      'flwh_short',
      badChecksum,
      'not-a-key',
    ]) {
      const response = await post(app, key, { email: email() })
      expect(response.status).toBe(404)
      expect(response.headers.get('x-ratelimit-limit')).toBe('60')
      const body = await response.json()
      bodies.push({ ...body, request_id: undefined })
      expect(body.request_id).toBe(response.headers.get('x-request-id'))
    }
    for (const body of bodies) {
      expect(body).toEqual({
        error: 'webhook_not_found',
        message: 'webhook not found: the key is unknown or the source is disabled',
        request_id: undefined,
      })
    }
    // The disabled source's owner sees the refusal in its log.
    const [log] = await logsOf(ctx, disabled.source.id)
    expect(log).toMatchObject({ httpStatus: 404, outcome: 'rejected', reason: 'source_disabled' })
  })

  test('last_request_at is recorded off the request path and never moves back', async () => {
    const clock = new FakeClock(Date.UTC(2026, 5, 1, 12, 0, 0))
    const { app, ctx, services, source, apiKey } = await setup({}, { clock })
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    clock.advance(1500)
    // A refused request is a request too.
    expect((await post(app, apiKey, [1])).status).toBe(400)
    const recorder = services.inbound.lastRequests
    await recorder.flush()
    const read = async () =>
      (await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id)))[0]!.lastRequestAt
    expect((await read())?.toISOString()).toBe(new Date(clock.now()).toISOString())
    // Another replica noting an older time does not move it back.
    recorder.note(source.id, clock.now() - 60_000)
    await recorder.flush()
    expect((await read())?.toISOString()).toBe(new Date(clock.now()).toISOString())
  })

  test('disabling a source takes effect at once, also when it is cached', async () => {
    const { app, ctx, services, source, apiKey } = await setup()
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
    await ctx.database.query('update webhook_sources set enabled = false where id = $1', [source.id])
    await services.sourceCache.announceChange(source.id)
    expect((await post(app, apiKey, { email: email() })).status).toBe(404)
  })

  test('bodies that are not JSON objects are 400 with a clear code, and logged', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const cases: Array<[BodyInit, Record<string, string>, string]> = [
      ['{"email": ', { 'content-type': 'application/json' }, 'invalid_json'],
      ['[1, 2]', { 'content-type': 'application/json' }, 'invalid_body'],
      ['"text"', { 'content-type': 'application/json' }, 'invalid_body'],
      ['null', { 'content-type': 'application/json' }, 'invalid_body'],
      ['email=a@b.co', { 'content-type': 'application/x-www-form-urlencoded' }, 'invalid_content_type'],
      [new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), { 'content-type': 'application/json' }, 'invalid_body'],
    ]
    for (const [body, headers, code] of cases) {
      const response = await app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { body, headers }))
      expect(response.status).toBe(400)
      const json = await response.json()
      expect(json).toMatchObject({ error: code, message: expect.any(String), request_id: expect.any(String) })
      const [log] = await logsOf(ctx, source.id)
      expect(log).toMatchObject({ httpStatus: 400, outcome: 'rejected', reason: code })
    }
  })

  test('a field of the wrong type or size is a 400 with details naming it', async () => {
    const { app, apiKey } = await setup()
    const response = await post(app, apiKey, {
      email: 42,
      first_name: ['a'],
      status: 'x'.repeat(51),
      phone_raw: null,
    })
    expect(response.status).toBe(400)
    const body = await response.json()
    expect(body.error).toBe('validation_failed')
    expect(body.details).toEqual(
      expect.arrayContaining([
        { path: '/email', message: 'must be a string, got number' },
        { path: '/first_name', message: 'must be a string, got array' },
        { path: '/status', message: 'must be at most 50 characters' },
      ]),
    )
    expect(body.details).toHaveLength(3)
  })

  test('102,400 bytes of valid JSON are accepted; 102,401 bytes are a 413', async () => {
    const { app, ctx, source, apiKey } = await setup()
    const sized = (bytes: number) => {
      const base = JSON.stringify({ email: email(), notes: '' })
      return base.replace('"notes":""', `"notes":"${'x'.repeat(bytes - base.length)}"`)
    }
    const exact = sized(102_400)
    expect(Buffer.byteLength(exact)).toBe(102_400)
    const accepted = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: exact,
        headers: { 'content-type': 'application/json' },
      }),
    )
    expect(accepted.status).toBe(200)
    expect((await accepted.json()).status).toBe('created')

    const over = sized(102_401)
    // Without Content-Length the body is counted while it streams.
    const streamed = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: over,
        headers: { 'content-type': 'application/json' },
      }),
    )
    expect(streamed.status).toBe(413)
    expect(await streamed.json()).toMatchObject({ error: 'payload_too_large', limit_bytes: 102_400 })
    // With a declared Content-Length it is refused without reading.
    const declared = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: over,
        headers: { 'content-type': 'application/json', 'content-length': '102401' },
      }),
    )
    expect(declared.status).toBe(413)
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({
      httpStatus: 413,
      reason: 'payload_too_large',
      bodyBytes: 102_401,
      body: null,
    })
  })

  test('IP allow list: IPv4, IPv6 and CIDR entries', async () => {
    const { app, ctx, source, apiKey } = await setup({
      ipAllowlist: ['203.0.113.7', '2001:db8::/32', '10.1.0.0/16'],
    })
    const from = (ip: string) => post(app, apiKey, { email: email() }, { 'x-forwarded-for': ip })
    expect((await from('203.0.113.7')).status).toBe(200)
    expect((await from('10.1.200.3')).status).toBe(200)
    expect((await from('2001:db8:1::5')).status).toBe(200)
    const refused = await from('203.0.113.8')
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({
      error: 'ip_not_allowed',
      message: expect.stringContaining('203.0.113.8'),
    })
    expect((await from('10.2.0.1')).status).toBe(403)
    expect((await from('2001:db9::1')).status).toBe(403)
    const [log] = await logsOf(ctx, source.id)
    expect(log).toMatchObject({ httpStatus: 403, reason: 'ip_not_allowed', clientIp: '2001:db9::1' })
  })

  test('domain allow list: exact hosts and *.example.com, from Origin or Referer', async () => {
    const { app, apiKey } = await setup({ domainAllowlist: ['shop.test', '*.example.com'] })
    const withHeaders = (headers: Record<string, string>) => post(app, apiKey, { email: email() }, headers)
    expect((await withHeaders({ origin: 'https://shop.test' })).status).toBe(200)
    expect((await withHeaders({ origin: 'https://www.example.com' })).status).toBe(200)
    expect((await withHeaders({ origin: 'https://a.b.example.com:8443' })).status).toBe(200)
    expect((await withHeaders({ referer: 'https://promo.example.com/landing?x=1' })).status).toBe(200)
    const apex = await withHeaders({ origin: 'https://example.com' })
    expect(apex.status).toBe(403)
    expect((await apex.json()).error).toBe('domain_not_allowed')
    expect((await withHeaders({ origin: 'https://evil-example.com' })).status).toBe(403)
    expect((await withHeaders({ origin: 'https://shop.test.evil.io' })).status).toBe(403)
    expect((await withHeaders({})).status).toBe(403)
  })

  test('the 61st request in a minute on one key is a 429 while another key still passes', async () => {
    const clock = new FakeClock()
    const { app, ctx, services, organization, source, apiKey } = await setup({}, { clock })
    const other = await createSource(ctx, organization.id)
    for (let index = 0; index < 60; index++) {
      const response = await post(app, apiKey, { email: email() })
      expect(response.status).toBe(200)
      clock.advance(100)
    }
    const refused = await post(app, apiKey, { email: email() }, { origin: 'https://site.test' })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('60')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(refused.headers.get('access-control-allow-origin')).toBe('*')
    expect(await refused.json()).toEqual({
      error: 'rate_limited',
      message: expect.any(String),
      request_id: refused.headers.get('x-request-id'),
      limit: 60,
      remaining: 0,
      retry_after: 60,
    })
    expect((await post(app, other.apiKey, { email: email() })).status).toBe(200)
    // A flood of 429s is aggregated into one row that counts them.
    for (let index = 0; index < 99; index++)
      expect((await post(app, apiKey, { email: email() })).status).toBe(429)
    await services.inbound.rejections.flush()
    const throttled = (await logsOf(ctx, source.id)).filter((log) => log.httpStatus === 429)
    expect(throttled).toHaveLength(1)
    expect(throttled[0]).toMatchObject({ outcome: 'rejected', reason: 'rate_limited', repeatCount: 100 })
    // The oldest request leaves the window: one slot frees.
    clock.advance(60_000 - 6_000)
    expect((await post(app, apiKey, { email: email() })).status).toBe(200)
  })
})

describe('CORS', () => {
  test('preflight: * without a domain allow list; echoed origin when allowed; 403 otherwise', async () => {
    const open = await setup()
    const preflight = (app: App, key: string, origin: string) =>
      app.handle(
        request('OPTIONS', `/api/webhook/lead/${key}`, {
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'content-type',
          },
        }),
      )
    const anyOrigin = await preflight(open.app, open.apiKey, 'https://anything.test')
    expect(anyOrigin.status).toBe(204)
    expect(anyOrigin.headers.get('access-control-allow-origin')).toBe('*')
    expect(anyOrigin.headers.get('access-control-allow-methods')).toBe('POST, GET, OPTIONS')
    expect(anyOrigin.headers.get('access-control-allow-headers')).toBe('Content-Type, X-Request-Id')
    expect(anyOrigin.headers.get('access-control-max-age')).toBe('600')

    const closed = await setup({ domainAllowlist: ['*.shop.test'] })
    const allowed = await preflight(closed.app, closed.apiKey, 'https://www.shop.test')
    expect(allowed.status).toBe(204)
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://www.shop.test')
    expect(allowed.headers.get('vary')).toBe('Origin')
    const refused = await preflight(closed.app, closed.apiKey, 'https://evil.test')
    expect(refused.status).toBe(403)
    expect(refused.headers.get('access-control-allow-origin')).toBeNull()
    expect((await refused.json()).error).toBe('domain_not_allowed')
    const [log] = await logsOf(closed.ctx, closed.source.id)
    expect(log).toMatchObject({ method: 'OPTIONS', httpStatus: 403, reason: 'domain_not_allowed' })

    const unknown = await preflight(open.app, generateSecret('source_key'), 'https://a.test')
    expect(unknown.status).toBe(404)
  })

  test('responses, errors included, carry CORS headers for browsers', async () => {
    const { app, apiKey } = await setup({ domainAllowlist: ['shop.test'] })
    const ok = await post(app, apiKey, { email: email() }, { origin: 'https://shop.test' })
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://shop.test')
    expect(ok.headers.get('access-control-expose-headers')).toContain('X-RateLimit-Remaining')
    const refused = await post(app, apiKey, { email: email() }, { origin: 'https://other.test' })
    expect(refused.status).toBe(403)
    expect(refused.headers.get('access-control-allow-origin')).toBe('https://other.test')
    const invalid = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        body: '{',
        headers: { origin: 'https://shop.test', 'content-type': 'application/json' },
      }),
    )
    expect(invalid.status).toBe(400)
    expect(invalid.headers.get('access-control-allow-origin')).toBe('https://shop.test')
  })
})

describe('GET /api/webhook/lead/{api_key}', () => {
  test('describes the expected body, with the mapping, and creates nothing', async () => {
    const { app, ctx, source, apiKey } = await setup({
      fieldMapping: { mail: 'email' },
      defaultCountry: 'DE',
    })
    const response = await app.handle(request('GET', `/api/webhook/lead/${apiKey}`))
    expect(response.status).toBe(200)
    expect(response.headers.get('x-ratelimit-remaining')).toBe('59')
    const body = await response.json()
    expect(body).toMatchObject({
      method: 'POST',
      path: '/api/webhook/lead/{api_key}',
      content_type: 'application/json',
      max_body_bytes: 102_400,
      require_one_of: ['email', 'phone_raw'],
      field_mapping: { mail: 'email' },
      default_country: 'DE',
      spam_filter: true,
      rate_limit: { limit: 60, window_seconds: 60 },
      documentation_url: 'http://lead-capture.test/swagger',
      source: { name: source.name, enabled: true },
    })
    expect(body.fields.email).toMatchObject({ type: 'string', max_length: 320 })
    expect(Object.keys(body.outcomes).sort()).toEqual(['created', 'error', 'spam', 'updated'])
    expect(JSON.stringify(body)).not.toContain(apiKey)
    expect(await ctx.db.select().from(leads).where(eq(leads.sourceId, source.id))).toHaveLength(0)
    expect(await logsOf(ctx, source.id)).toHaveLength(0)
  })

  test('a bad key is a 404', async () => {
    const { app } = await setup()
    const response = await app.handle(request('GET', `/api/webhook/lead/${generateSecret('source_key')}`))
    expect(response.status).toBe(404)
    expect((await response.json()).error).toBe('webhook_not_found')
  })
})
