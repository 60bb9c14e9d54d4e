import { describe, expect, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import { leads } from '../../src/db/schema'
import { createOrganization, createSource } from '../helpers/factories'
import { email, post, setup } from '../helpers/inbound'

// Dedup within an organization, by e-mail then phone, also under concurrency.

describe('POST /api/webhook/lead/{api_key}: outcomes', () => {
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
})
