import type { PlanName } from '../config'

/** The permission catalogue (DESIGN §4). These, and the wildcards, are the recognised PAT scopes. */
export const PERMISSIONS = [
  'leads.read',
  'leads.write',
  'leads.delete',
  'settings.integrations',
  'settings.members',
] as const
export type Permission = (typeof PERMISSIONS)[number]

export const WILDCARD_SCOPES = ['leads.*', 'settings.*', '*'] as const
export const SCOPES = [...PERMISSIONS, ...WILDCARD_SCOPES] as const
export type Scope = (typeof SCOPES)[number]

export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const
export type Role = (typeof ROLES)[number]

/** Higher rank can do more; nobody grants a role above their own. */
export const ROLE_RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 }

const ROLE_SCOPES: Record<Role, Scope[]> = {
  owner: ['*'],
  admin: ['*'],
  member: ['leads.*'],
  viewer: ['leads.read'],
}

export const FEATURES = ['integrations'] as const
export type Feature = (typeof FEATURES)[number]

export const PLAN_FEATURES: Record<PlanName, Feature[]> = {
  free: [],
  pro: ['integrations'],
  enterprise: ['integrations'],
}

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value)
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value)
}

export function expandScopes(scopes: readonly string[]): Set<Permission> {
  const out = new Set<Permission>()
  for (const scope of scopes) {
    if (scope === '*') {
      for (const permission of PERMISSIONS) out.add(permission)
    } else if (scope.endsWith('.*')) {
      const prefix = scope.slice(0, -1)
      for (const permission of PERMISSIONS) if (permission.startsWith(prefix)) out.add(permission)
    } else if ((PERMISSIONS as readonly string[]).includes(scope)) out.add(scope as Permission)
  }
  return out
}

/**
 * The role's permissions, narrowed by the PAT's scopes when a PAT is used. An empty scope list
 * means "the user's own permissions"; a scope never adds a permission the role lacks.
 */
export function effectivePermissions(role: Role, patScopes: readonly string[] | null): Set<Permission> {
  const fromRole = expandScopes(ROLE_SCOPES[role])
  if (!patScopes || patScopes.length === 0) return fromRole
  const fromScopes = expandScopes(patScopes)
  return new Set([...fromRole].filter((permission) => fromScopes.has(permission)))
}

export function planFeatures(plan: string): Feature[] {
  return PLAN_FEATURES[plan as PlanName] ?? []
}
