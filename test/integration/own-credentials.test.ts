import { beforeAll, describe, expect, test } from 'bun:test'
import { ROLES } from '../../src/lib/permissions'
import { INVALID_CREDENTIAL_MESSAGE } from '../../src/modules/auth/credentials'
import { expectError, expectUnauthorized } from '../helpers/common-route-tests'
import { uniqueEmail } from '../helpers/emails'
import { createLead, createPat, createSession, createSignedInUser, createSource } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 5: a credential that still works must be revocable, whatever the plan and the role.
 * A downgrade to `free` (or to a role without `settings.integrations`) leaves a leads.* PAT able to
 * read and delete leads; the user must still be able to list and revoke it.
 */
beforeAll(() => testDatabase(), 60_000)

const PLANS = ['free', 'pro', 'enterprise'] as const

describe('own credentials on every plan and role', () => {
  for (const plan of PLANS) {
    for (const role of ROLES) {
      test(`${plan} / ${role}: a session lists and revokes its own PAT; the PAT is refused at once`, async () => {
        const { app, ctx } = await makeTestApp()
        const { user, token: session } = await createSignedInUser(ctx, { role, plan })
        const pat = await createPat(ctx, user, { scopes: ['leads.*'], name: 'leaked' })
        // Every role reads leads, on every plan: the token works, so it must be revocable.
        expect((await app.handle(request('GET', '/api/v2/leads', { token: pat.token }))).status).toBe(200)

        const listed = await app.handle(request('GET', '/api/pat', { token: session }))
        expect(listed.status).toBe(200)
        expect(listed.headers.get('x-request-id')).toBeTruthy()
        const list = await listed.json()
        expect(list).toEqual({
          data: [expect.objectContaining({ token_id: pat.tokenId, name: 'leaked', status: 'active' })],
          next_cursor: null,
        })
        expect(JSON.stringify(list)).not.toContain(pat.token)

        const revoked = await app.handle(request('DELETE', `/api/pat/${pat.tokenId}`, { token: session }))
        expect(revoked.status).toBe(204)
        expect(await revoked.text()).toBe('')
        const body = await expectUnauthorized(
          await app.handle(request('GET', '/api/v2/leads', { token: pat.token })),
          true,
        )
        expect(body.message).toBe(INVALID_CREDENTIAL_MESSAGE)
      })
    }
  }

  test('free plan: the issue’s case, a leads.* PAT that reads, edits and deletes leads, revoked by its user', async () => {
    const { app, ctx } = await makeTestApp()
    const { user, organization, token: session } = await createSignedInUser(ctx, { plan: 'free' })
    const lead = await createLead(ctx, organization.id)
    const pat = await createPat(ctx, user, { scopes: ['leads.*'] })
    expect((await app.handle(request('GET', `/api/v2/leads/${lead.id}`, { token: pat.token }))).status).toBe(
      200,
    )
    const patched = await app.handle(
      request('PATCH', `/api/v2/leads/${lead.id}`, { token: pat.token, json: { status: 'x' } }),
    )
    expect(patched.status).toBe(200)
    expect((await app.handle(request('GET', '/api/pat', { token: session }))).status).toBe(200)
    expect((await app.handle(request('DELETE', `/api/pat/${pat.tokenId}`, { token: session }))).status).toBe(
      204,
    )
    await expectUnauthorized(
      await app.handle(request('DELETE', `/api/v2/leads/${lead.id}`, { token: pat.token })),
      true,
    )
  })

  for (const plan of PLANS) {
    test(`${plan}: a PAT of any scope revokes itself, in either header`, async () => {
      const { app, ctx } = await makeTestApp()
      const { user } = await createSignedInUser(ctx, { role: 'viewer', plan })
      for (const [scopes, header] of [
        [['leads.read'], 'authorization'],
        [[], 'x-api-key'],
      ] as const) {
        const pat = await createPat(ctx, user, { scopes: [...scopes] })
        const headers: Record<string, string> =
          header === 'authorization' ? { authorization: `Bearer ${pat.token}` } : { 'x-api-key': pat.token }
        const response = await app.handle(request('DELETE', `/api/pat/${pat.tokenId}`, { headers }))
        expect(response.status).toBe(204)
        await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { headers })), true)
      }
    })
  }

  test('a narrow PAT cannot list or revoke its siblings; a PAT with settings.integrations can, on free too', async () => {
    const { app, ctx } = await makeTestApp()
    const { user } = await createSignedInUser(ctx, { role: 'owner', plan: 'free' })
    const narrow = await createPat(ctx, user, { scopes: ['leads.read'] })
    const manager = await createPat(ctx, user, { scopes: ['settings.integrations'] })
    const sibling = await createPat(ctx, user)
    await expectError(
      await app.handle(request('GET', '/api/pat', { token: narrow.token })),
      403,
      'permission_denied',
    )
    await expectError(
      await app.handle(request('DELETE', `/api/pat/${sibling.tokenId}`, { token: narrow.token })),
      403,
      'permission_denied',
    )
    expect((await app.handle(request('GET', '/api/pat', { token: manager.token }))).status).toBe(200)
    expect(
      (await app.handle(request('DELETE', `/api/pat/${sibling.tokenId}`, { token: manager.token }))).status,
    ).toBe(204)
  })

  test("another user's token stays a 404, on every plan", async () => {
    const { app, ctx } = await makeTestApp()
    const mine = await createSignedInUser(ctx, { plan: 'free' })
    const theirs = await createSignedInUser(ctx, { plan: 'free' })
    const pat = await createPat(ctx, theirs.user)
    await expectError(
      await app.handle(request('DELETE', `/api/pat/${pat.tokenId}`, { token: mine.token })),
      404,
      'not_found',
    )
  })

  test('free plan: me and logout answer (nothing about your own identity is gated by plan)', async () => {
    const { app, ctx } = await makeTestApp()
    const { user, token } = await createSignedInUser(ctx, { role: 'viewer', plan: 'free' })
    const me = await app.handle(request('GET', '/api/auth/me', { token }))
    expect(me.status).toBe(200)
    expect((await me.json()).organization).toMatchObject({ plan: 'free', features: [] })
    const second = await createSession(ctx, user.id)
    expect((await app.handle(request('POST', '/api/auth/logout', { token: second }))).status).toBe(204)
    await expectUnauthorized(await app.handle(request('GET', '/api/auth/me', { token: second })), true)
  })

  test('free plan: a leaked webhook key can still be found, rotated and ended; creating and editing sources stay gated', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, token } = await createSignedInUser(ctx, { plan: 'free' })
    const first = await createSource(ctx, organization.id)
    const second = await createSource(ctx, organization.id)
    const inbound = (key: string) =>
      app.handle(
        request('POST', `/api/webhook/lead/${key}`, {
          json: { email: uniqueEmail('l') },
        }),
      )
    // Leads keep flowing on the free plan: that is why the key must stay revocable.
    expect((await inbound(first.apiKey)).status).toBe(200)

    const list = await app.handle(request('GET', '/api/webhook/sources', { token }))
    expect(list.status).toBe(200)
    expect((await list.json()).data.map((source: { id: string }) => source.id).sort()).toEqual(
      [first.source.id, second.source.id].sort(),
    )
    expect(
      (await app.handle(request('GET', `/api/webhook/sources/${first.source.id}`, { token }))).status,
    ).toBe(200)

    const rotated = await app.handle(
      request('POST', `/api/webhook/sources/${first.source.id}/regenerate-key`, { token, json: {} }),
    )
    expect(rotated.status).toBe(200)
    const { api_key: newKey } = await rotated.json()
    expect((await inbound(first.apiKey)).status).toBe(404)
    expect((await inbound(newKey)).status).toBe(200)

    const removed = await app.handle(request('DELETE', `/api/webhook/sources/${second.source.id}`, { token }))
    expect(removed.status).toBe(204)
    expect((await inbound(second.apiKey)).status).toBe(404)

    await expectError(
      await app.handle(request('POST', '/api/webhook/sources', { token, json: { name: 'new' } })),
      403,
      'plan_feature_required',
    )
    await expectError(
      await app.handle(
        request('PATCH', `/api/webhook/sources/${first.source.id}`, { token, json: { name: 'x' } }),
      ),
      403,
      'plan_feature_required',
    )
  })
})
