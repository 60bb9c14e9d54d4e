import { beforeAll, describe, expect, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import { users } from '../../src/db/schema'
import type { Role } from '../../src/lib/permissions'
import { expectError, expectUnauthorized, runCommonRouteTests } from '../helpers/common-route-tests'
import { createPat, createSession, createSignedInUser, createUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

const PASSWORD = 'a long initial password'

function uniqueEmail() {
  return `member-${Bun.randomUUIDv7()}@example.com`
}

describe('GET /api/v2/members', () => {
  test('the members of the caller’s organization only, newest first, paged', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, user: owner, token } = await createSignedInUser(ctx)
    const viewer = await createUser(ctx, organization.id, { role: 'viewer' })
    const member = await createUser(ctx, organization.id, { role: 'member' })
    await createSignedInUser(ctx)
    const response = await app.handle(request('GET', '/api/v2/members', { token }))
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(body.next_cursor).toBeNull()
    expect(body.data).toEqual([
      {
        user_id: member.id,
        email: member.email,
        role: 'member',
        created_at: member.createdAt.toISOString(),
        updated_at: member.updatedAt.toISOString(),
      },
      expect.objectContaining({ user_id: viewer.id, role: 'viewer' }),
      expect.objectContaining({ user_id: owner.id, role: 'owner' }),
    ])
    expect(JSON.stringify(body)).not.toContain('password')
    const first = await (await app.handle(request('GET', '/api/v2/members?limit=2', { token }))).json()
    expect(first.data).toHaveLength(2)
    const second = await (
      await app.handle(request('GET', `/api/v2/members?limit=2&cursor=${first.next_cursor}`, { token }))
    ).json()
    expect(second).toEqual({ data: [expect.objectContaining({ user_id: owner.id })], next_cursor: null })
  })

  test('works on the free plan: members are not a plan feature', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx, { plan: 'free' })
    expect((await app.handle(request('GET', '/api/v2/members', { token }))).status).toBe(200)
  })
})

describe('POST /api/v2/members', () => {
  test('201: the new member can log in with the initial password', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, token } = await createSignedInUser(ctx, { role: 'admin' })
    const email = uniqueEmail()
    const response = await app.handle(
      request('POST', '/api/v2/members', {
        token,
        json: { email: email.toUpperCase(), password: PASSWORD, role: 'admin' },
      }),
    )
    expect(response.status).toBe(201)
    const member = await response.json()
    expect(member).toMatchObject({ email, role: 'admin', user_id: expect.stringMatching(/^[0-9a-f-]{36}$/) })
    const login = await app.handle(
      request('POST', '/api/auth/login', { json: { email, password: PASSWORD } }),
    )
    expect(login.status).toBe(200)
    expect((await login.json()).user).toMatchObject({ id: member.user_id, organization_id: organization.id })
  })

  test('nobody adds a role above their own: 403 role_above_own', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx, { role: 'admin' })
    const response = await app.handle(
      request('POST', '/api/v2/members', {
        token,
        json: { email: uniqueEmail(), password: PASSWORD, role: 'owner' },
      }),
    )
    await expectError(response, 403, 'role_above_own')
  })

  test('409 email_taken for an e-mail with an account in any organization', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    const elsewhere = await createSignedInUser(ctx)
    const response = await app.handle(
      request('POST', '/api/v2/members', {
        token,
        json: { email: elsewhere.user.email, password: PASSWORD, role: 'member' },
      }),
    )
    await expectError(response, 409, 'email_taken')
  })

  test('400 validation_failed for a short password, an unknown role or an unknown field', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    for (const json of [
      { email: uniqueEmail(), password: 'short', role: 'member' },
      { email: uniqueEmail(), password: PASSWORD, role: 'superuser' },
      { email: uniqueEmail(), password: PASSWORD, role: 'member', organization_id: Bun.randomUUIDv7() },
    ]) {
      await expectError(
        await app.handle(request('POST', '/api/v2/members', { token, json })),
        400,
        'validation_failed',
      )
    }
  })
})

describe('PATCH /api/v2/members/{user_id}', () => {
  test('200: the role changes and applies to the member’s next request', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, token } = await createSignedInUser(ctx)
    const member = await createUser(ctx, organization.id, { role: 'member' })
    const memberSession = await createSession(ctx, member.id)
    await expectError(
      await app.handle(request('GET', '/api/v2/members', { token: memberSession })),
      403,
      'permission_denied',
    )
    const response = await app.handle(
      request('PATCH', `/api/v2/members/${member.id}`, { token, json: { role: 'admin' } }),
    )
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ user_id: member.id, role: 'admin' })
    expect((await app.handle(request('GET', '/api/v2/members', { token: memberSession }))).status).toBe(200)
  })

  test('an admin can neither grant owner nor change an owner: 403 role_above_own', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, user: owner } = await createSignedInUser(ctx)
    const admin = await createUser(ctx, organization.id, { role: 'admin' })
    const member = await createUser(ctx, organization.id, { role: 'member' })
    const token = await createSession(ctx, admin.id)
    const attempts: Array<[string, Role]> = [
      [member.id, 'owner'],
      [admin.id, 'owner'],
      [owner.id, 'viewer'],
    ]
    for (const [userId, role] of attempts) {
      await expectError(
        await app.handle(request('PATCH', `/api/v2/members/${userId}`, { token, json: { role } })),
        403,
        'role_above_own',
      )
    }
    expect(
      (await app.handle(request('PATCH', `/api/v2/members/${member.id}`, { token, json: { role: 'admin' } })))
        .status,
    ).toBe(200)
  })

  test('the last owner cannot be demoted (409 last_owner); with a second owner it can', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, user: owner, token } = await createSignedInUser(ctx)
    const demoteSelf = () =>
      app.handle(request('PATCH', `/api/v2/members/${owner.id}`, { token, json: { role: 'admin' } }))
    await expectError(await demoteSelf(), 409, 'last_owner')
    await createUser(ctx, organization.id, { role: 'owner' })
    const response = await demoteSelf()
    expect(response.status).toBe(200)
    expect((await response.json()).role).toBe('admin')
  })

  test('two owners demoting each other at once: one succeeds, one gets last_owner', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, user: first, token: firstToken } = await createSignedInUser(ctx)
    const second = await createUser(ctx, organization.id, { role: 'owner' })
    const secondToken = await createSession(ctx, second.id)
    const responses = await Promise.all([
      app.handle(
        request('PATCH', `/api/v2/members/${second.id}`, { token: firstToken, json: { role: 'member' } }),
      ),
      app.handle(
        request('PATCH', `/api/v2/members/${first.id}`, { token: secondToken, json: { role: 'member' } }),
      ),
    ])
    const statuses = responses.map((response) => response.status).sort()
    // The loser is either refused as the last owner, or, if it ran second, was already demoted.
    expect(statuses[0]).toBe(200)
    expect([403, 409]).toContain(statuses[1]!)
    // Read from the database: whichever owner lost the race may no longer list members.
    const owners = await ctx.db
      .select()
      .from(users)
      .where(and(eq(users.organizationId, organization.id), eq(users.role, 'owner')))
    expect(owners).toHaveLength(1)
  })

  test('a user of another organization, or an unknown id, is 404', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    const other = await createSignedInUser(ctx, { role: 'viewer' })
    for (const userId of [other.user.id, Bun.randomUUIDv7()]) {
      await expectError(
        await app.handle(request('PATCH', `/api/v2/members/${userId}`, { token, json: { role: 'member' } })),
        404,
        'not_found',
      )
    }
    const me = await (await app.handle(request('GET', '/api/auth/me', { token: other.token }))).json()
    expect(me.user.role).toBe('viewer')
  })
})

describe('DELETE /api/v2/members/{user_id}', () => {
  test('204: the member’s sessions and tokens stop working at once', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, token } = await createSignedInUser(ctx)
    const member = await createUser(ctx, organization.id, { role: 'admin' })
    const memberSession = await createSession(ctx, member.id)
    const memberPat = await createPat(ctx, member)
    const response = await app.handle(request('DELETE', `/api/v2/members/${member.id}`, { token }))
    expect(response.status).toBe(204)
    for (const credential of [memberSession, memberPat.token]) {
      await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { token: credential })), true)
    }
    await expectError(
      await app.handle(request('DELETE', `/api/v2/members/${member.id}`, { token })),
      404,
      'not_found',
    )
  })

  test('the last owner stays (409 last_owner); an admin cannot remove an owner (403)', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, user: owner, token } = await createSignedInUser(ctx)
    await expectError(
      await app.handle(request('DELETE', `/api/v2/members/${owner.id}`, { token })),
      409,
      'last_owner',
    )
    const admin = await createUser(ctx, organization.id, { role: 'admin' })
    const adminToken = await createSession(ctx, admin.id)
    await expectError(
      await app.handle(request('DELETE', `/api/v2/members/${owner.id}`, { token: adminToken })),
      403,
      'role_above_own',
    )
    // An admin may leave on their own.
    expect(
      (await app.handle(request('DELETE', `/api/v2/members/${admin.id}`, { token: adminToken }))).status,
    ).toBe(204)
  })

  test('a user of another organization is 404 and stays', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    const other = await createSignedInUser(ctx, { role: 'member' })
    await expectError(
      await app.handle(request('DELETE', `/api/v2/members/${other.user.id}`, { token })),
      404,
      'not_found',
    )
    expect((await app.handle(request('GET', '/api/auth/me', { token: other.token }))).status).toBe(200)
  })
})

const memberPath = async ({
  ctx,
  organizationId,
}: {
  ctx: Parameters<typeof createUser>[0]
  organizationId: string
}) => `/api/v2/members/${(await createUser(ctx, organizationId, { role: 'viewer' })).id}`
runCommonRouteTests({
  name: 'GET /api/v2/members',
  method: 'GET',
  path: () => '/api/v2/members',
  permission: 'settings.members',
})
runCommonRouteTests({
  name: 'POST /api/v2/members',
  method: 'POST',
  path: () => '/api/v2/members',
  body: () => ({ email: uniqueEmail(), password: PASSWORD, role: 'viewer' }),
  permission: 'settings.members',
})
runCommonRouteTests({
  name: 'PATCH /api/v2/members/{user_id}',
  method: 'PATCH',
  path: memberPath,
  body: { role: 'member' },
  permission: 'settings.members',
})
runCommonRouteTests({
  name: 'DELETE /api/v2/members/{user_id}',
  method: 'DELETE',
  path: memberPath,
  permission: 'settings.members',
})
