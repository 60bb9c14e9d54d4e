import { Elysia } from 'elysia'
import { AppError, errors } from '../lib/errors'
import type { Feature, Permission } from '../lib/permissions'
import {
  type Authentication,
  type CredentialResolver,
  INVALID_CREDENTIAL_MESSAGE,
  type Principal,
} from '../modules/auth/credentials'

export interface AuthRequirement {
  /** Permission the principal must hold (after PAT scope intersection). */
  permission?: Permission
  /** Plan feature the organization must have. */
  feature?: Feature
  /** Only a session may call (e.g. creating a PAT). */
  sessionOnly?: boolean
}

const MISSING_CREDENTIAL_MESSAGE =
  'authentication required: send a session token or PAT as "Authorization: Bearer <token>", or a PAT as "X-API-Key: <token>"'

/**
 * The one permission and plan check (DESIGN §4): the principal of a successful authentication
 * when it meets the requirement, else the 401 / 403 AppError. The API's `auth` macro and the
 * dashboard's `page` macro both call it, so a page allows exactly what its API route allows.
 */
export function authorize(authentication: Authentication, requirement: AuthRequirement | true): Principal {
  if (!authentication.ok) {
    throw errors.unauthorized(
      authentication.tokenSent ? INVALID_CREDENTIAL_MESSAGE : MISSING_CREDENTIAL_MESSAGE,
      authentication.tokenSent,
    )
  }
  const { principal } = authentication
  const rule = requirement === true ? {} : requirement
  if (rule.sessionOnly && principal.kind !== 'session') {
    throw new AppError(
      'session_required',
      'this operation needs a session token, not a personal access token',
    )
  }
  if (rule.permission && !principal.permissions.has(rule.permission)) {
    throw new AppError('permission_denied', `the permission "${rule.permission}" is required`, {
      required_permission: rule.permission,
    })
  }
  if (rule.feature && !principal.features.includes(rule.feature)) {
    throw new AppError(
      'plan_feature_required',
      `the plan "${principal.plan}" does not include the feature "${rule.feature}"`,
      { required_feature: rule.feature, plan: principal.plan },
    )
  }
  return principal
}

/** True when the principal meets the requirement: what a page shows or hides. */
export function allows(principal: Principal, requirement: AuthRequirement | true): boolean {
  try {
    authorize({ ok: true, principal }, requirement)
    return true
  } catch {
    return false
  }
}

/**
 * The `auth` macro: `{ auth: { permission: 'settings.integrations', feature: 'integrations' } }` on a
 * route resolves `principal` or answers 401 / 403 with DESIGN §4 bodies. Headers only: the
 * dashboard's session cookie is never accepted here.
 */
export function authPlugin(resolver: CredentialResolver) {
  return new Elysia({ name: 'auth' }).macro({
    auth: (requirement: AuthRequirement | true) => ({
      detail: { security: [{ bearerAuth: [] }, { apiKeyAuth: [] }] },
      async resolve({ request }) {
        return { principal: authorize(await resolver.authenticate(request), requirement) }
      },
    }),
  })
}

export type AuthPlugin = ReturnType<typeof authPlugin>
