import { describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { leads } from '../../src/db/schema'
import { generateSecret } from '../../src/lib/secrets'
import { logsOf, setup } from '../helpers/inbound'
import { request } from '../helpers/test-app'

// GET on the webhook URL: the description of the expected body.

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
