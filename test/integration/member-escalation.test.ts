import { beforeAll, describe, expect, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import { users } from '../../src/db/schema'
import type { Role } from '../../src/lib/permissions'
import { expectError } from '../helpers/common-route-tests'
import { createOrganization, createPat, createSession, createUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 6: no credential creates, promotes, sets the password of, or otherwise acts on a
 * member whose permissions exceed the credential's own effective permissions (role ∩ PAT scopes,
 * spec §5 rule 4). Every credential role × PAT scope set × target role × member route, against an
 * oracle written out here by hand (not the service's own function).
 */
beforeAll(() => testDatabase(), 60_000)

const ALL = ['leads.read', 'leads.write', 'leads.delete', 'settings.integrations', 'settings.members']
// DESIGN §4, written out: owner/admin `*`, member `leads.*`, viewer `leads.read`.
const ROLE_PERMISSIONS: Record<Role, string[]> = {
  owner: ALL,
  admin: ALL,
  member: ['leads.read', 'leads.write', 'leads.delete'],
  viewer: ['leads.read'],
}
const RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 }
const ROLES: Role[] = ['owner', 'admin', 'member', 'viewer']

function scopePermissions(scopes: string[]): string[] {
  return ALL.filter((permission) =>
    scopes.some(
      (scope) =>
        scope === '*' ||
        scope === permission ||
        (scope.endsWith('.*') && permission.startsWith(scope.slice(0, -1))),
    ),
  )
}

/** null: a session. */
const SCOPE_SETS: Array<string[] | null> = [
  null,
  [],
  ['settings.members'],
  ['settings.*'],
  ['settings.members', 'leads.read'],
  ['settings.members', 'leads.*'],
  ['settings.members', 'settings.integrations', 'leads.*'],
  ['*'],
]

function effective(role: Role, scopes: string[] | null): Set<string> {
  const fromRole = ROLE_PERMISSIONS[role]
  if (!scopes || scopes.length === 0) return new Set(fromRole)
  const fromScopes = scopePermissions(scopes)
  return new Set(fromRole.filter((permission) => fromScopes.includes(permission)))
}

/** May a credential of `actor` with `held` permissions act on a member of `role`? */
function mayHandle(actor: Role, held: Set<string>, role: Role): boolean {
  return RANK[role] <= RANK[actor] && ROLE_PERMISSIONS[role].every((permission) => held.has(permission))
}

const PASSWORD = 'a long initial password'
const email = () => `escalation-${Bun.randomUUIDv7()}@example.com`

for (const actor of ROLES) {
  for (const scopes of SCOPE_SETS) {
    const credential = scopes === null ? 'session' : `PAT [${scopes.join(', ')}]`
    const held = effective(actor, scopes)

    describe(`${actor} with ${credential}`, () => {
      test('every target role on every member route: allowed only within the credential', async () => {
        const { app, ctx } = await makeTestApp()
        const organization = await createOrganization(ctx)
        const me = await createUser(ctx, organization.id, { role: actor })
        // A second owner, so the last-owner rule never decides a case.
        await createUser(ctx, organization.id, { role: 'owner' })
        const token =
          scopes === null ? await createSession(ctx, me.id) : (await createPat(ctx, me, { scopes })).token
        const roleOf = async (id: string) =>
          (
            await ctx.db
              .select({ role: users.role })
              .from(users)
              .where(and(eq(users.id, id), eq(users.organizationId, organization.id)))
          )[0]?.role

        const expectRefused = async (response: Response) => {
          if (!held.has('settings.members')) {
            const body = await expectError(response, 403, 'permission_denied')
            expect(body.required_permission).toBe('settings.members')
          } else await expectError(response, 403, 'role_above_own')
        }

        for (const target of ROLES) {
          const allowed = held.has('settings.members') && mayHandle(actor, held, target)
          const where = `${target} target`

          // POST: create a member of the target role with a password of the caller's choosing.
          const address = email()
          const added = await app.handle(
            request('POST', '/api/v2/members', {
              token,
              json: { email: address, password: PASSWORD, role: target },
            }),
          )
          if (allowed) {
            expect({ where, status: added.status }).toEqual({ where, status: 201 })
            expect(await added.json()).toMatchObject({ email: address, role: target })
          } else {
            await expectRefused(added)
            expect(await ctx.db.select().from(users).where(eq(users.email, address))).toEqual([])
            // And so no login as the member the caller tried to create.
            const login = await app.handle(
              request('POST', '/api/auth/login', { json: { email: address, password: PASSWORD } }),
            )
            expect(login.status).toBe(401)
          }

          // PATCH: promote a viewer to the target role (acts on a viewer, grants the target role).
          const viewer = await createUser(ctx, organization.id, { role: 'viewer' })
          const promoted = await app.handle(
            request('PATCH', `/api/v2/members/${viewer.id}`, { token, json: { role: target } }),
          )
          const mayPromote =
            held.has('settings.members') && mayHandle(actor, held, 'viewer') && mayHandle(actor, held, target)
          if (mayPromote) {
            expect({ where, status: promoted.status }).toEqual({ where, status: 200 })
            expect(await roleOf(viewer.id)).toBe(target)
          } else {
            await expectRefused(promoted)
            expect(await roleOf(viewer.id)).toBe('viewer')
          }

          // PATCH: change a member of the target role to viewer (acts on the target).
          const holder = await createUser(ctx, organization.id, { role: target })
          const demoted = await app.handle(
            request('PATCH', `/api/v2/members/${holder.id}`, { token, json: { role: 'viewer' } }),
          )
          const mayDemote = allowed && mayHandle(actor, held, 'viewer')
          if (mayDemote) {
            expect({ where, status: demoted.status }).toEqual({ where, status: 200 })
            expect(await roleOf(holder.id)).toBe('viewer')
          } else {
            await expectRefused(demoted)
            expect(await roleOf(holder.id)).toBe(target)
          }

          // DELETE: remove a member of the target role.
          const victim = await createUser(ctx, organization.id, { role: target })
          const removed = await app.handle(request('DELETE', `/api/v2/members/${victim.id}`, { token }))
          if (allowed) {
            expect({ where, status: removed.status }).toEqual({ where, status: 204 })
            expect(await roleOf(victim.id)).toBeUndefined()
          } else {
            await expectRefused(removed)
            expect(await roleOf(victim.id)).toBe(target)
          }
        }
      })
    })
  }
}

test('the issue’s case: an owner’s PAT with only settings.members cannot mint an owner and log in as it', async () => {
  const { app, ctx } = await makeTestApp()
  const organization = await createOrganization(ctx)
  const owner = await createUser(ctx, organization.id, { role: 'owner' })
  const { token } = await createPat(ctx, owner, { scopes: ['settings.members'] })
  const address = email()
  const response = await app.handle(
    request('POST', '/api/v2/members', {
      token,
      json: { email: address, password: PASSWORD, role: 'owner' },
    }),
  )
  const body = await expectError(response, 403, 'role_above_own')
  expect(body.missing_permissions).toEqual([
    'leads.read',
    'leads.write',
    'leads.delete',
    'settings.integrations',
  ])
  const login = await app.handle(
    request('POST', '/api/auth/login', { json: { email: address, password: PASSWORD } }),
  )
  expect(login.status).toBe(401)
})
