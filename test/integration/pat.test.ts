import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { personalAccessTokens, users } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import type { Role } from '../../src/lib/permissions'
import { digestSecret } from '../../src/lib/secrets'
import { INVALID_CREDENTIAL_MESSAGE } from '../../src/modules/auth/credentials'
import { expectError, expectUnauthorized, runCommonRouteTests } from '../helpers/common-route-tests'
import { createPat, createSession, createSignedInUser, createUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

const DAY_MS = 24 * 3600 * 1000
type App = Awaited<ReturnType<typeof makeTestApp>>['app']

beforeAll(() => testDatabase(), 60_000)

async function createToken(app: App, session: string, json: Record<string, unknown> = { name: 'ci' }) {
  const response = await app.handle(request('POST', '/api/pat', { token: session, json }))
  expect(response.status).toBe(201)
  return response.json()
}

describe('POST /api/pat', () => {
  test('201: the token once, with its id, name, scopes and times; only the digest is stored', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token: session } = await createSignedInUser(ctx)
    const response = await app.handle(
      request('POST', '/api/pat', {
        token: session,
        json: {
          name: 'CRM sync',
          scopes: ['leads.*', 'leads.*', 'settings.integrations'],
          expires_in_days: 30,
        },
      }),
    )
    expect(response.status).toBe(201)
    expect(response.headers.get('x-ratelimit-limit')).toBe('10')
    const body = await response.json()
    const now = clock.now()
    expect(body).toEqual({
      token_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      token: expect.stringMatching(/^fl_pat_[0-9A-Za-z]{38}$/),
      name: 'CRM sync',
      scopes: ['leads.*', 'settings.integrations'],
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + 30 * DAY_MS).toISOString(),
    })
    const [row] = await ctx.db
      .select()
      .from(personalAccessTokens)
      .where(eq(personalAccessTokens.id, body.token_id))
    expect(row!.tokenDigest).toBe(digestSecret(body.token))
    expect(JSON.stringify(row)).not.toContain(body.token.slice(7, 30))
  })

  test('no expires_in_days, or null: the token never expires', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token: session } = await createSignedInUser(ctx)
    const absent = await createToken(app, session, { name: 'forever' })
    const explicit = await createToken(app, session, { name: 'forever too', expires_in_days: null })
    expect([absent.expires_at, explicit.expires_at]).toEqual([null, null])
    expect(absent.scopes).toEqual([])
    clock.advance(3650 * DAY_MS)
    const me = await app.handle(request('GET', '/api/auth/me', { token: absent.token }))
    expect(me.status).toBe(200)
  })

  test('expires_in_days accepts 1 and 365; 0, 366 and 1.5 are 400 validation_failed', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session } = await createSignedInUser(ctx)
    for (const days of [1, 365]) {
      expect(
        (await createToken(app, session, { name: 'ok', expires_in_days: days })).expires_at,
      ).not.toBeNull()
    }
    for (const days of [0, 366, 1.5]) {
      const response = await app.handle(
        request('POST', '/api/pat', { token: session, json: { name: 'bad', expires_in_days: days } }),
      )
      const body = await expectError(response, 400, 'validation_failed')
      expect(JSON.stringify(body.details)).toContain('/expires_in_days')
    }
  })

  test('400 validation_failed without a name, with a blank one, or with a misspelt field', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session, user } = await createSignedInUser(ctx)
    for (const json of [{}, { name: '   ' }]) {
      await expectError(
        await app.handle(request('POST', '/api/pat', { token: session, json })),
        400,
        'validation_failed',
      )
    }
    // A typo must not create a token with all of the user's permissions.
    const typo = await app.handle(
      request('POST', '/api/pat', { token: session, json: { name: 'x', scope: ['leads.read'] } }),
    )
    const body = await expectError(typo, 400, 'validation_failed')
    expect(body.details).toEqual([{ path: '/scope', message: expect.stringContaining('unknown field') }])
    const rows = await ctx.db
      .select()
      .from(personalAccessTokens)
      .where(eq(personalAccessTokens.userId, user.id))
    expect(rows).toEqual([])
  })

  test('422 unknown_scope names every unrecognised scope; nothing is created', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session, user } = await createSignedInUser(ctx)
    const response = await app.handle(
      request('POST', '/api/pat', {
        token: session,
        json: { name: 'bad', scopes: ['leads.read', 'leads.export', 'LEADS.READ', 'leads', 'settings.**'] },
      }),
    )
    const body = await expectError(response, 422, 'unknown_scope')
    expect(body.unknown_scopes).toEqual(['leads.export', 'LEADS.READ', 'leads', 'settings.**'])
    expect(body.allowed_scopes).toContain('leads.*')
    const rows = await ctx.db
      .select()
      .from(personalAccessTokens)
      .where(eq(personalAccessTokens.userId, user.id))
    expect(rows).toEqual([])
  })

  test('a PAT cannot create a PAT: 403 session_required, in either header', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx)
    const { token } = await createPat(ctx, user, { scopes: ['*'] })
    for (const headers of [{ authorization: `Bearer ${token}` }, { 'x-api-key': token }] as Record<
      string,
      string
    >[]) {
      const response = await app.handle(request('POST', '/api/pat', { headers, json: { name: 'nested' } }))
      await expectError(response, 403, 'session_required')
    }
  })

  test('rate-limited to 10 per minute per user', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session, organization } = await createSignedInUser(ctx)
    for (let index = 0; index < 10; index++) await createToken(app, session, { name: `t${index}` })
    const refused = await app.handle(
      request('POST', '/api/pat', { token: session, json: { name: 'one more' } }),
    )
    const body = await expectError(refused, 429, 'rate_limited')
    expect(body).toMatchObject({ limit: 10, remaining: 0 })
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    // Another user of the same organization has a bucket of their own.
    const colleague = await createUser(ctx, organization.id, { role: 'admin' })
    await createToken(app, await createSession(ctx, colleague.id), { name: 'colleague' })
  })
})

describe('GET /api/pat', () => {
  test('lists only masked values: no token appears anywhere in the response', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session } = await createSignedInUser(ctx)
    const created = await createToken(app, session, {
      name: 'masked',
      scopes: ['leads.read'],
      expires_in_days: 7,
    })
    const response = await app.handle(request('GET', '/api/pat', { token: session }))
    expect(response.status).toBe(200)
    const text = await response.text()
    const body = JSON.parse(text)
    const secretBody = created.token.slice('fl_pat_'.length)
    expect(body).toEqual({
      data: [
        {
          token_id: created.token_id,
          name: 'masked',
          masked_token: `fl_pat_${secretBody.slice(0, 4)}…${secretBody.slice(-4)}`,
          scopes: ['leads.read'],
          status: 'active',
          created_at: created.created_at,
          expires_at: created.expires_at,
          last_used_at: null,
        },
      ],
      next_cursor: null,
    })
    expect(text).not.toContain(created.token)
    expect(text).not.toContain(secretBody.slice(4, -4))
    expect(text).not.toContain(digestSecret(created.token))
  })

  test('last_used_at is set by use; an expired token is listed as expired', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token: session } = await createSignedInUser(ctx)
    const created = await createToken(app, session, { name: 'used', expires_in_days: 2 })
    clock.advance(DAY_MS)
    expect(
      (await app.handle(request('GET', '/api/pat', { headers: { 'x-api-key': created.token } }))).status,
    ).toBe(200)
    const usedAt = new Date(clock.now()).toISOString()
    clock.advance(DAY_MS)
    const list = await (await app.handle(request('GET', '/api/pat', { token: session }))).json()
    expect(list.data[0]).toMatchObject({
      token_id: created.token_id,
      last_used_at: usedAt,
      status: 'expired',
    })
  })

  test('pages with limit and an opaque cursor, newest first; a bad cursor is 400', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session } = await createSignedInUser(ctx)
    const ids: string[] = []
    for (const name of ['a', 'b', 'c']) ids.push((await createToken(app, session, { name })).token_id)
    const first = await (await app.handle(request('GET', '/api/pat?limit=2', { token: session }))).json()
    expect(first.data.map((item: { name: string }) => item.name)).toEqual(['c', 'b'])
    expect(typeof first.next_cursor).toBe('string')
    const second = await (
      await app.handle(request('GET', `/api/pat?limit=2&cursor=${first.next_cursor}`, { token: session }))
    ).json()
    expect(second).toMatchObject({ data: [{ token_id: ids[0] }], next_cursor: null })
    for (const query of ['limit=0', 'limit=201', 'cursor=garbage']) {
      await expectError(
        await app.handle(request('GET', `/api/pat?${query}`, { token: session })),
        400,
        'validation_failed',
      )
    }
  })

  test("only the caller's tokens: not a colleague's, not another organization's", async () => {
    const { app, ctx } = await makeTestApp()
    const mine = await createSignedInUser(ctx)
    const colleague = await createUser(ctx, mine.organization.id, { role: 'admin' })
    const stranger = await createSignedInUser(ctx)
    await createPat(ctx, colleague, { name: 'colleague' })
    await createPat(ctx, stranger.user, { name: 'stranger' })
    const own = await createToken(app, mine.token, { name: 'mine' })
    const list = await (await app.handle(request('GET', '/api/pat', { token: mine.token }))).json()
    expect(list.data.map((item: { token_id: string }) => item.token_id)).toEqual([own.token_id])
    const theirs = await (await app.handle(request('GET', '/api/pat', { token: stranger.token }))).json()
    expect(theirs.data.map((item: { name: string }) => item.name)).toEqual(['stranger'])
  })
})

describe('DELETE /api/pat/{token_id}', () => {
  test('204; the token is refused at once, on this and on another replica', async () => {
    const { app, ctx } = await makeTestApp()
    const replica = await makeTestApp()
    const { token: session } = await createSignedInUser(ctx)
    const created = await createToken(app, session, { name: 'to revoke' })
    const onReplica = () =>
      replica.app.handle(request('GET', '/api/pat', { headers: { 'x-api-key': created.token } }))
    expect((await onReplica()).status).toBe(200)
    const response = await app.handle(request('DELETE', `/api/pat/${created.token_id}`, { token: session }))
    expect(response.status).toBe(204)
    expect(await response.text()).toBe('')
    const body = await expectUnauthorized(await onReplica(), true)
    expect(body.message).toBe(INVALID_CREDENTIAL_MESSAGE)
    await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { token: created.token })), true)
    const list = await (await app.handle(request('GET', '/api/pat', { token: session }))).json()
    expect(list.data).toEqual([])
    await expectError(
      await app.handle(request('DELETE', `/api/pat/${created.token_id}`, { token: session })),
      404,
      'not_found',
    )
  })

  test('a PAT may revoke itself', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx)
    const { token, tokenId } = await createPat(ctx, user)
    expect((await app.handle(request('DELETE', `/api/pat/${tokenId}`, { token }))).status).toBe(204)
    await expectUnauthorized(await app.handle(request('GET', '/api/pat', { token })), true)
  })

  test("another organization's or a colleague's token is 404 and keeps working", async () => {
    const { app, ctx } = await makeTestApp()
    const victim = await createSignedInUser(ctx)
    const victimToken = await createPat(ctx, victim.user)
    const attacker = await createSignedInUser(ctx)
    const colleague = await createUser(ctx, victim.organization.id, { role: 'admin' })
    const colleagueSession = await createSession(ctx, colleague.id)
    for (const session of [attacker.token, colleagueSession]) {
      await expectError(
        await app.handle(request('DELETE', `/api/pat/${victimToken.tokenId}`, { token: session })),
        404,
        'not_found',
      )
    }
    expect((await app.handle(request('GET', '/api/pat', { token: victimToken.token }))).status).toBe(200)
  })

  test('an id that is not a UUID is 400; an unknown one is 404', async () => {
    const { app, ctx } = await makeTestApp()
    const { token: session } = await createSignedInUser(ctx)
    await expectError(
      await app.handle(request('DELETE', '/api/pat/not-a-uuid', { token: session })),
      400,
      'validation_failed',
    )
    await expectError(
      await app.handle(request('DELETE', `/api/pat/${Bun.randomUUIDv7()}`, { token: session })),
      404,
      'not_found',
    )
  })
})

describe('expiry', () => {
  test('a token works until expires_in_days have passed, then 401 invalid_token', async () => {
    const clock = new FakeClock()
    const { app, ctx } = await makeTestApp({ clock })
    const { token: session } = await createSignedInUser(ctx)
    const created = await createToken(app, session, { name: 'short', expires_in_days: 1 })
    clock.advance(DAY_MS - 1)
    expect((await app.handle(request('GET', '/api/pat', { token: created.token }))).status).toBe(200)
    clock.advance(1)
    const expired = await app.handle(request('GET', '/api/pat', { token: created.token }))
    const body = await expectUnauthorized(expired, true)
    expect(body.message).toBe(INVALID_CREDENTIAL_MESSAGE)
  })
})

describe('scopes: the intersection of the scopes and the role, per request', () => {
  const cases: Array<{ role: Role; scopes: string[]; permissions: string[] }> = [
    {
      role: 'owner',
      scopes: [],
      permissions: ['leads.read', 'leads.write', 'leads.delete', 'settings.integrations', 'settings.members'],
    },
    { role: 'owner', scopes: ['leads.*'], permissions: ['leads.read', 'leads.write', 'leads.delete'] },
    { role: 'owner', scopes: ['settings.*'], permissions: ['settings.integrations', 'settings.members'] },
    {
      role: 'admin',
      scopes: ['leads.read', 'settings.integrations'],
      permissions: ['leads.read', 'settings.integrations'],
    },
    { role: 'member', scopes: [], permissions: ['leads.read', 'leads.write', 'leads.delete'] },
    { role: 'member', scopes: ['*'], permissions: ['leads.read', 'leads.write', 'leads.delete'] },
    { role: 'member', scopes: ['settings.*', 'leads.write'], permissions: ['leads.write'] },
    { role: 'viewer', scopes: ['*'], permissions: ['leads.read'] },
    { role: 'viewer', scopes: ['leads.write', 'leads.delete'], permissions: [] },
  ]
  for (const { role, scopes, permissions } of cases) {
    test(`${role} with [${scopes.join(', ')}] → [${permissions.join(', ')}]`, async () => {
      const { app, ctx } = await makeTestApp()
      const { user } = await createSignedInUser(ctx, { role })
      const { token } = await createPat(ctx, user, { scopes })
      const me = await (await app.handle(request('GET', '/api/auth/me', { token }))).json()
      expect(me.permissions).toEqual(permissions)
      const management = await app.handle(request('GET', '/api/pat', { token }))
      if (permissions.includes('settings.integrations')) expect(management.status).toBe(200)
      else {
        const body = await expectError(management, 403, 'permission_denied')
        expect(body.required_permission).toBe('settings.integrations')
      }
    })
  }

  test("a viewer's * PAT cannot reach settings.integrations; an owner's leads.* PAT cannot either", async () => {
    const { app, ctx } = await makeTestApp()
    const viewer = await createSignedInUser(ctx, { role: 'viewer' })
    const owner = await createSignedInUser(ctx, { role: 'owner' })
    const viewerStar = await createPat(ctx, viewer.user, { scopes: ['*'] })
    const ownerLeads = await createPat(ctx, owner.user, { scopes: ['leads.*'] })
    for (const [token, user] of [
      [viewerStar.token, viewer.user],
      [ownerLeads.token, owner.user],
    ] as const) {
      // A sibling token of the same user: only its own revocation is open to a narrow PAT.
      const sibling = await createPat(ctx, user)
      await expectError(await app.handle(request('GET', '/api/pat', { token })), 403, 'permission_denied')
      await expectError(
        await app.handle(request('DELETE', `/api/pat/${sibling.tokenId}`, { token })),
        403,
        'permission_denied',
      )
    }
  })

  test('demoting the user narrows an existing PAT at once', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx, { role: 'admin' })
    const { token } = await createPat(ctx, user, { scopes: ['*'] })
    expect((await app.handle(request('GET', '/api/pat', { token }))).status).toBe(200)
    await ctx.db.update(users).set({ role: 'member' }).where(eq(users.id, user.id))
    await expectError(await app.handle(request('GET', '/api/pat', { token })), 403, 'permission_denied')
  })
})

const PAT_ROUTE = { permission: 'settings.integrations', feature: 'integrations' } as const
runCommonRouteTests({
  name: 'POST /api/pat',
  method: 'POST',
  path: () => '/api/pat',
  body: { name: 'x' },
  ...PAT_ROUTE,
})
// Listing and revoking your own tokens is open to every plan and role (test/integration/own-credentials.test.ts).
runCommonRouteTests({ name: 'GET /api/pat', method: 'GET', path: () => '/api/pat' })
runCommonRouteTests({
  name: 'DELETE /api/pat/{token_id}',
  method: 'DELETE',
  path: async ({ ctx, organizationId, userId }) =>
    `/api/pat/${(await createPat(ctx, { id: userId, organizationId })).tokenId}`,
})
