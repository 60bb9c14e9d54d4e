import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import {
  effectivePermissions,
  expandScopes,
  isScope,
  PERMISSIONS,
  planFeatures,
  ROLE_RANK,
  ROLES,
  SCOPES,
} from '../../src/lib/permissions'

const role = fc.constantFrom(...ROLES)
const scopes = fc.array(fc.constantFrom(...SCOPES), { maxLength: 8 })

describe('permissions', () => {
  test('roles: owner and admin have everything, member leads.*, viewer leads.read', () => {
    expect([...effectivePermissions('owner', null)]).toEqual([...PERMISSIONS])
    expect([...effectivePermissions('admin', null)]).toEqual([...PERMISSIONS])
    expect([...effectivePermissions('member', null)]).toEqual(['leads.read', 'leads.write', 'leads.delete'])
    expect([...effectivePermissions('viewer', null)]).toEqual(['leads.read'])
  })

  test('wildcards expand to their catalogue entries', () => {
    expect([...expandScopes(['leads.*'])]).toEqual(['leads.read', 'leads.write', 'leads.delete'])
    expect([...expandScopes(['settings.*'])]).toEqual(['settings.integrations', 'settings.members'])
    expect([...expandScopes(['*'])]).toEqual([...PERMISSIONS])
    expect([...expandScopes(['leads.export', 'LEADS.READ', 'leads'])]).toEqual([])
  })

  test('only catalogue entries and the three wildcards are scopes', () => {
    for (const scope of SCOPES) expect(isScope(scope)).toBe(true)
    for (const scope of ['', 'leads', 'leads.**', 'settings.integration', '*.*', ' leads.read']) {
      expect(isScope(scope)).toBe(false)
    }
  })

  test('property: a PAT never has a permission its user lacks', () => {
    fc.assert(
      fc.property(role, scopes, (userRole, patScopes) => {
        const fromRole = effectivePermissions(userRole, null)
        for (const permission of effectivePermissions(userRole, patScopes)) {
          expect(fromRole.has(permission)).toBe(true)
        }
      }),
    )
  })

  test('property: effective = role ∩ expanded scopes; empty scopes = the role', () => {
    fc.assert(
      fc.property(role, scopes, (userRole, patScopes) => {
        const fromRole = effectivePermissions(userRole, null)
        const expected =
          patScopes.length === 0
            ? fromRole
            : new Set([...fromRole].filter((p) => expandScopes(patScopes).has(p)))
        expect([...effectivePermissions(userRole, patScopes)].sort()).toEqual([...expected].sort())
      }),
    )
  })

  test('property: more scopes never mean fewer permissions', () => {
    fc.assert(
      fc.property(
        role,
        scopes.filter((list) => list.length > 0),
        scopes,
        (userRole, base, extra) => {
          const narrow = effectivePermissions(userRole, base)
          const wide = effectivePermissions(userRole, [...base, ...extra])
          for (const permission of narrow) expect(wide.has(permission)).toBe(true)
        },
      ),
    )
  })

  test('role ranks order owner > admin > member > viewer', () => {
    expect([...ROLES].sort((a, b) => ROLE_RANK[b] - ROLE_RANK[a])).toEqual([
      'owner',
      'admin',
      'member',
      'viewer',
    ])
  })

  test('plans: free has no features, pro and enterprise have integrations, unknown has none', () => {
    expect(planFeatures('free')).toEqual([])
    expect(planFeatures('pro')).toEqual(['integrations'])
    expect(planFeatures('enterprise')).toEqual(['integrations'])
    expect(planFeatures('platinum')).toEqual([])
  })
})
