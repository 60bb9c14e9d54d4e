import { beforeAll, describe, expect, test } from 'bun:test'
import createClient, { type Middleware } from 'openapi-fetch'
import type { paths } from '../client/schema'
import { makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

/**
 * An integrator's journey written only against the client generated from the published document
 * (test/client/schema.d.ts, openapi-typescript; CI regenerates it and fails on a difference) and
 * openapi-fetch: if the document and the server drift apart, this file stops type-checking or its
 * calls fail. Every response also goes through the contract check of makeTestApp.
 */
async function client() {
  const { app } = await makeTestApp()
  const api = createClient<paths>({ baseUrl: 'http://localhost', fetch: (request) => app.handle(request) })
  let token: string | undefined
  const bearer: Middleware = {
    onRequest({ request }) {
      if (token && !request.headers.has('authorization'))
        request.headers.set('authorization', `Bearer ${token}`)
      return request
    },
  }
  api.use(bearer)
  return { api, signIn: (value: string | undefined) => (token = value) }
}

describe('a typed client generated from the document', () => {
  test('sign-up, source, leads of every outcome, logs, health, key regeneration, PATs, members, logout', async () => {
    const { api, signIn } = await client()
    const email = `owner-${crypto.randomUUID()}@example.com`

    const signup = await api.POST('/api/auth/signup', {
      body: { email, password: 'correct horse battery staple', organization_name: 'Journey Ltd' },
    })
    expect(signup.response.status).toBe(201)
    signIn(signup.data!.token)
    expect(signup.data!.user.email).toBe(email)

    const created = await api.POST('/api/webhook/sources', { body: { name: 'Website form' } })
    expect(created.response.status).toBe(201)
    const source = created.data!
    expect(source.webhook_url.endsWith(source.api_key)).toBe(true)

    // One lead per outcome; `attribution` is the tracker's free-form object.
    const key = { params: { path: { api_key: source.api_key } } }
    const lead = { email: 'ada@example.com', first_name: 'Ada', _elapsed_ms: 5000 }
    const outcomes = [
      await api.POST('/api/webhook/lead/{api_key}', {
        ...key,
        body: {
          ...lead,
          attribution: { first_touch: { utm_source: 'newsletter' } },
          page_url: 'https://a.test/',
        },
      }),
      await api.POST('/api/webhook/lead/{api_key}', { ...key, body: { ...lead, status: 'qualified' } }),
      await api.POST('/api/webhook/lead/{api_key}', { ...key, body: { ...lead, _gotcha: 'bot' } }),
      await api.POST('/api/webhook/lead/{api_key}', {
        ...key,
        body: { first_name: 'Nobody', _elapsed_ms: 5000 },
      }),
    ]
    expect(outcomes.map((outcome) => [outcome.response.status, outcome.data?.status])).toEqual([
      [200, 'created'],
      [200, 'updated'],
      [200, 'spam'],
      [200, 'error'],
    ])
    const first = outcomes[0]!.data!
    const leadId = 'lead_id' in first ? first.lead_id : ''

    const described = await api.GET('/api/webhook/lead/{api_key}', key)
    expect(described.data?.method).toBe('POST')

    const sourcePath = { params: { path: { id: source.id } } }
    const logs = await api.GET('/api/webhook/sources/{id}/logs', {
      params: { path: { id: source.id }, query: { limit: 10 } },
    })
    expect(logs.data!.data.map((entry) => entry.outcome).sort()).toEqual([
      'created',
      'error',
      'spam',
      'updated',
    ])
    const entry = await api.GET('/api/webhook/sources/{id}/logs/{log_id}', {
      params: { path: { id: source.id, log_id: logs.data!.data[0]!.id } },
    })
    expect(entry.data!.id).toBe(logs.data!.data[0]!.id)
    const filtered = await api.GET('/api/webhook/sources/{id}/logs', {
      params: { path: { id: source.id }, query: { outcome: 'spam', status: 200 } },
    })
    expect(filtered.data!.data).toHaveLength(1)

    const health = await api.GET('/api/webhook/sources/{id}/health', sourcePath)
    expect(health.data!.totals).toMatchObject({ requests: 4, created: 1, updated: 1, spam: 1, error: 1 })

    const leads = await api.GET('/api/v2/leads', { params: { query: { limit: 5 } } })
    expect(leads.data!.data.map((row) => row.lead_id)).toEqual([leadId])
    const updated = await api.PATCH('/api/v2/leads/{id}', {
      params: { path: { id: leadId } },
      body: { status: 'won' },
    })
    expect(updated.data!.status).toBe('won')

    // The body of regenerate-key is optional; the old key stops at once without a grace period.
    const regenerated = await api.POST('/api/webhook/sources/{id}/regenerate-key', sourcePath)
    expect(regenerated.response.status).toBe(200)
    const oldKey = await api.POST('/api/webhook/lead/{api_key}', { ...key, body: lead })
    expect([oldKey.response.status, oldKey.error?.error]).toEqual([404, 'webhook_not_found'])
    const graced = await api.POST('/api/webhook/sources/{id}/regenerate-key', {
      ...sourcePath,
      body: { grace_seconds: 60 },
    })
    expect(graced.data!.api_key).not.toBe(regenerated.data!.api_key)

    const pat = await api.POST('/api/pat', {
      body: { name: 'CRM sync', scopes: ['leads.*'], expires_in_days: 30 },
    })
    expect(pat.response.status).toBe(201)
    const asPat = await api.GET('/api/auth/me', { headers: { authorization: `Bearer ${pat.data!.token}` } })
    expect(asPat.data!.auth.kind).toBe('pat')
    const pats = await api.GET('/api/pat', {})
    expect(pats.data!.data.map((row) => row.token_id)).toEqual([pat.data!.token_id])
    const revoked = await api.DELETE('/api/pat/{token_id}', {
      params: { path: { token_id: pat.data!.token_id } },
    })
    expect(revoked.response.status).toBe(204)

    const member = await api.POST('/api/v2/members', {
      body: {
        email: `member-${crypto.randomUUID()}@example.com`,
        password: 'a long initial password',
        role: 'member',
      },
    })
    expect(member.response.status).toBe(201)
    const memberPath = { params: { path: { user_id: member.data!.user_id } } }
    const promoted = await api.PATCH('/api/v2/members/{user_id}', { ...memberPath, body: { role: 'admin' } })
    expect(promoted.data!.role).toBe('admin')
    const members = await api.GET('/api/v2/members', {})
    expect(members.data!.data).toHaveLength(2)
    expect((await api.DELETE('/api/v2/members/{user_id}', memberPath)).response.status).toBe(204)

    expect((await api.DELETE('/api/webhook/sources/{id}', sourcePath)).response.status).toBe(204)
    expect((await api.POST('/api/auth/logout', {})).response.status).toBe(204)
    const after = await api.GET('/api/auth/me', {})
    expect([after.response.status, after.error?.error]).toEqual([401, 'invalid_token'])
  })

  test('errors come back typed with their documented codes', async () => {
    const { api } = await client()
    const anonymous = await api.GET('/api/webhook/sources', { params: { query: { limit: 5 } } })
    expect([anonymous.response.status, anonymous.error?.error]).toEqual([401, 'unauthorized'])
    expect(anonymous.response.headers.get('www-authenticate')).toBe('Bearer realm="api"')
  })
})
