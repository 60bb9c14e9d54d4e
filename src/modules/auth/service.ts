import type { PlanName } from '../../config'
import type { AppContext } from '../../context'
import { canonicalEmail } from '../../lib/contact'
import { AppError, errors } from '../../lib/errors'
import { newId } from '../../lib/ids'
import { requireName } from '../../lib/names'
import { passwordProblem } from '../../lib/passwords'
import { PERMISSIONS, planFeatures, type Role } from '../../lib/permissions'
import { digestSecret, generateSecret } from '../../lib/secrets'
import {
  INVALID_CREDENTIAL_MESSAGE,
  type Principal,
  SESSION_ABSOLUTE_MS,
  SESSION_IDLE_MS,
} from './credentials'
import type { LoginInput, OrganizationView, SignupInput, UserView } from './model'
import {
  deleteSession,
  findOrganization,
  findUserByEmail,
  findUserInOrganization,
  insertOrganization,
  insertSession,
  insertUser,
  type OrganizationRow,
  type UserRow,
  updateOrganizationPlan,
} from './repository'

export function userView(row: UserRow): UserView {
  return {
    id: row.id,
    email: row.email,
    role: row.role as Role,
    organization_id: row.organizationId,
    created_at: row.createdAt.toISOString(),
  }
}

export function organizationView(row: OrganizationRow): OrganizationView {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    features: planFeatures(row.plan),
    created_at: row.createdAt.toISOString(),
  }
}

/**
 * The password rules of lib/passwords.ts, as a 400 naming the field. Every path that sets a
 * password goes through the two creators below, so sign-up, members and the CLI share them.
 */
async function assertAcceptablePassword(password: string): Promise<void> {
  const problem = await passwordProblem(password)
  if (problem) {
    throw errors.validation(`the password ${problem}`, [{ path: '/password', message: problem }])
  }
}

/** Argon2id with Bun's defaults (DESIGN §1). */
export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password)
}

/** One answer for an unknown e-mail and a wrong password: the API does not confirm accounts. */
function invalidCredentials(): AppError {
  return new AppError(
    'invalid_credentials',
    'the e-mail address or the password is wrong',
    {},
    { 'www-authenticate': 'Bearer realm="api"' },
  )
}

/**
 * Organizations, users and sessions: sign-up, log-in, log-out, and the operations the CLI uses
 * (create an organization with its owner, create a user, change a plan).
 */
export class IdentityService {
  // Verified against when the e-mail is unknown, so a login costs the same whether or not the
  // account exists and the response time does not reveal which e-mails are registered.
  private dummyHash: Promise<string> | undefined

  constructor(private readonly ctx: AppContext) {}

  private now(): Date {
    return new Date(this.ctx.clock.now())
  }

  /** A new organization with one owner, in one transaction: never an organization without an owner. */
  async createOrganizationWithOwner(input: {
    organizationName: string
    email: string
    password: string
    plan: PlanName
  }): Promise<{ organization: OrganizationRow; user: UserRow }> {
    const name = requireName(input.organizationName, '/organization_name')
    await assertAcceptablePassword(input.password)
    const passwordHash = await hashPassword(input.password)
    const at = this.now()
    return this.ctx.db.transaction(async (tx) => {
      const organization = await insertOrganization(tx, {
        id: newId(),
        name,
        plan: input.plan,
        at,
      })
      const user = await insertUser(tx, {
        id: newId(),
        organizationId: organization.id,
        email: canonicalEmail(input.email),
        passwordHash,
        role: 'owner',
        at,
      })
      return { organization, user }
    })
  }

  async createUser(input: {
    organizationId: string
    email: string
    password: string
    role: Role
  }): Promise<UserRow> {
    await assertAcceptablePassword(input.password)
    const organization = await findOrganization(this.ctx.db, input.organizationId)
    if (!organization) throw errors.notFound('organization')
    return insertUser(this.ctx.db, {
      id: newId(),
      organizationId: organization.id,
      email: canonicalEmail(input.email),
      passwordHash: await hashPassword(input.password),
      role: input.role,
      at: this.now(),
    })
  }

  async setPlan(organizationId: string, plan: PlanName): Promise<OrganizationRow> {
    const organization = await updateOrganizationPlan(this.ctx.db, organizationId, plan, this.now())
    if (!organization) throw errors.notFound('organization')
    return organization
  }

  async signup(input: SignupInput) {
    if (!this.ctx.config.signupEnabled) {
      throw new AppError('signup_disabled', 'sign-up is disabled on this service; ask an administrator')
    }
    const { organization, user } = await this.createOrganizationWithOwner({
      organizationName: input.organization_name,
      email: input.email,
      password: input.password,
      plan: this.ctx.config.defaultPlan,
    })
    return this.openSession(user, organization)
  }

  async login(input: LoginInput) {
    const user = await findUserByEmail(this.ctx.db, canonicalEmail(input.email))
    if (!user) {
      this.dummyHash ??= hashPassword('not a real password: timing equaliser')
      await Bun.password.verify(input.password, await this.dummyHash)
      throw invalidCredentials()
    }
    if (!(await Bun.password.verify(input.password, user.passwordHash))) throw invalidCredentials()
    const organization = await findOrganization(this.ctx.db, user.organizationId)
    if (!organization) throw invalidCredentials()
    return this.openSession(user, organization)
  }

  async logout(principal: Principal): Promise<void> {
    if (principal.kind !== 'session') {
      throw new AppError(
        'session_required',
        'log-out ends a session; revoke a PAT with DELETE /api/pat/{token_id}',
      )
    }
    await deleteSession(this.ctx.db, principal.credentialId)
  }

  async me(principal: Principal) {
    const [user, organization] = await Promise.all([
      findUserInOrganization(this.ctx.db, principal.organizationId, principal.userId),
      findOrganization(this.ctx.db, principal.organizationId),
    ])
    // The credential was valid a moment ago; a row gone since is a concurrent removal.
    if (!user || !organization) throw errors.unauthorized(INVALID_CREDENTIAL_MESSAGE, true)
    return {
      user: userView(user),
      organization: organizationView(organization),
      // Catalogue order, so the list is stable for clients and tests.
      permissions: PERMISSIONS.filter((permission) => principal.permissions.has(permission)),
      auth: { kind: principal.kind, credential_id: principal.credentialId, scopes: principal.scopes },
    }
  }

  private async openSession(user: UserRow, organization: OrganizationRow) {
    const token = generateSecret('session')
    const at = this.now()
    const expiresAt = new Date(at.getTime() + SESSION_ABSOLUTE_MS)
    await insertSession(this.ctx.db, {
      id: newId(),
      userId: user.id,
      tokenDigest: digestSecret(token),
      at,
      expiresAt,
    })
    return {
      token,
      expires_at: expiresAt.toISOString(),
      idle_timeout_seconds: SESSION_IDLE_MS / 1000,
      user: userView(user),
      organization: organizationView(organization),
    }
  }
}
