import { describe, expect, test } from 'bun:test'
import { eq, inArray } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { leads, webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { chunkPauseMs, LastRequestRecorder } from '../../src/modules/inbound/last-request'
import { uniqueEmail } from '../helpers/emails'
import { createSource } from '../helpers/factories'
import { email, logsOf, post, setup } from '../helpers/inbound'

// What an accepted POST stores and answers: a lead, spam, a missing contact; the field mapping.

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
})

/** last_request_at of each source, as ISO text by source id. */
async function lastRequestTimes(ctx: AppContext, sources: ReadonlyArray<{ id: string }>) {
  const rows = await ctx.db
    .select({ id: webhookSources.id, at: webhookSources.lastRequestAt })
    .from(webhookSources)
    .where(
      inArray(
        webhookSources.id,
        sources.map((each) => each.id),
      ),
    )
  return Object.fromEntries(rows.map((row) => [row.id, row.at?.toISOString()]))
}

describe('last_request_at of many sources', () => {
  test('the statements of a periodic flush are paced over at most half the interval; none at shutdown', () => {
    expect([1, 2, 5, 11, 21, 101].map((chunks) => chunkPauseMs(chunks))).toEqual([0, 250, 250, 250, 125, 25])
  })

  test('a paced flush writes every source; stop() meanwhile waits for it and writes the rest', async () => {
    const clock = new FakeClock(Date.UTC(2026, 5, 1, 12, 0, 0, 123))
    const { ctx, source, organization } = await setup({}, { clock })
    const others = []
    for (let index = 0; index < 4; index++) others.push((await createSource(ctx, organization.id)).source)
    const recorder = new LastRequestRecorder(ctx, { chunkSize: 2 })
    const first = [source, ...others.slice(0, 3)]
    for (const each of first) recorder.note(each.id, clock.now())
    // Two statements with a pause between them; a source noted meanwhile waits for the next write.
    const flushing = recorder.flush()
    recorder.note(others[3]!.id, clock.now() + 1)
    await recorder.stop()
    await flushing
    expect(await lastRequestTimes(ctx, [...first, others[3]!])).toEqual({
      ...Object.fromEntries(first.map((each) => [each.id, new Date(clock.now()).toISOString()])),
      [others[3]!.id]: new Date(clock.now() + 1).toISOString(),
    })
  })

  test('a flush in chunks writes every source noted, each to the millisecond', async () => {
    const clock = new FakeClock(Date.UTC(2026, 5, 1, 12, 0, 0, 123))
    const { ctx, source, organization } = await setup({}, { clock })
    const others = []
    for (let index = 0; index < 6; index++) others.push((await createSource(ctx, organization.id)).source)
    const sources = [source, ...others]
    // Chunks of 3 over 7 sources: three statements, the last one short.
    const recorder = new LastRequestRecorder(ctx, { chunkSize: 3 })
    for (const [index, each] of sources.entries()) recorder.note(each.id, clock.now() - index * 1001)
    await recorder.stop()
    expect(await lastRequestTimes(ctx, sources)).toEqual(
      Object.fromEntries(
        sources.map((each, index) => [each.id, new Date(clock.now() - index * 1001).toISOString()]),
      ),
    )
  })
})
