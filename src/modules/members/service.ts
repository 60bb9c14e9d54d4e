import type { AppContext } from '../../context'
import { creationPosition, decodeCursor, pageOf } from '../../lib/cursor'
import { AppError, errors } from '../../lib/errors'
import { isUuid } from '../../lib/ids'
import { effectivePermissions, isRole, PERMISSIONS, ROLE_RANK, type Role } from '../../lib/permissions'
import { DEFAULT_PAGE_SIZE } from '../../lib/schemas'
import type { Principal } from '../auth/credentials'
import { findUserInOrganization, type UserRow } from '../auth/repository'
import type { IdentityService } from '../auth/service'
import type { AddMemberInput, MemberListQueryInput, MemberView } from './model'
import { countOwners, deleteMember, listMembers, lockOrganization, updateMemberRole } from './repository'

export function memberView(row: UserRow): MemberView {
  return {
    user_id: row.id,
    email: row.email,
    role: row.role as Role,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  }
}

function rankOf(role: string): number {
  return isRole(role) ? ROLE_RANK[role] : -1
}

function roleAboveOwn(message: string, extra: Record<string, unknown> = {}) {
  return new AppError('role_above_own', message, extra)
}

/**
 * Nobody hands out, or acts on, more than they hold (spec §5 rule 4, DESIGN §4). "What they hold"
 * is the credential's effective permissions (role ∩ PAT scopes), not the role alone: a PAT scoped
 * to `settings.members` holds nothing else, so it may not create an owner with a password of its
 * choosing and log in as them. The rank rule (an admin never makes an owner) applies on top.
 */
function assertWithinCredential(principal: Principal, role: string, action: string): void {
  if (rankOf(role) > rankOf(principal.role)) {
    throw roleAboveOwn(`a ${principal.role} cannot ${action} the role "${role}"`)
  }
  const granted = isRole(role) ? effectivePermissions(role, null) : new Set(PERMISSIONS)
  const missing = PERMISSIONS.filter(
    (permission) => granted.has(permission) && !principal.permissions.has(permission),
  )
  if (missing.length > 0) {
    throw roleAboveOwn(
      `the role "${role}" has permissions this credential lacks (${missing.join(', ')}): it cannot ${action} it`,
      { missing_permissions: missing },
    )
  }
}

/**
 * Users of the caller's organization (DESIGN §4): nobody grants a role above their own or changes
 * someone ranked above them, and the last owner can be neither demoted nor removed.
 */
export class MembersService {
  constructor(
    private readonly ctx: AppContext,
    private readonly identity: IdentityService,
  ) {}

  async list(principal: Principal, query: MemberListQueryInput) {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const rows = await listMembers(this.ctx.db, { organizationId: principal.organizationId, beforeId, limit })
    const page = pageOf(rows, limit, creationPosition)
    return { data: page.rows.map(memberView), next_cursor: page.nextCursor }
  }

  /** One member of the caller's organization; another organization's user is a 404. */
  async get(principal: Principal, userId: string): Promise<MemberView> {
    const row = isUuid(userId)
      ? await findUserInOrganization(this.ctx.db, principal.organizationId, userId)
      : undefined
    if (!row) throw errors.notFound('member')
    return memberView(row)
  }

  async add(principal: Principal, input: AddMemberInput): Promise<MemberView> {
    assertWithinCredential(principal, input.role, 'add a member with')
    const user = await this.identity.createUser({
      organizationId: principal.organizationId,
      email: input.email,
      password: input.password,
      role: input.role,
    })
    return memberView(user)
  }

  async changeRole(principal: Principal, userId: string, role: Role): Promise<MemberView> {
    assertWithinCredential(principal, role, 'grant')
    return this.ctx.db.transaction(async (tx) => {
      await lockOrganization(tx, principal.organizationId)
      const target = await findUserInOrganization(tx, principal.organizationId, userId)
      if (!target) throw errors.notFound('member')
      this.assertMayChange(principal, target)
      if (target.role === 'owner' && role !== 'owner')
        await this.assertAnotherOwner(tx, principal.organizationId)
      const updated = await updateMemberRole(tx, {
        organizationId: principal.organizationId,
        userId,
        role,
        at: new Date(this.ctx.clock.now()),
      })
      return memberView(updated!)
    })
  }

  async remove(principal: Principal, userId: string): Promise<void> {
    await this.ctx.db.transaction(async (tx) => {
      await lockOrganization(tx, principal.organizationId)
      const target = await findUserInOrganization(tx, principal.organizationId, userId)
      if (!target) throw errors.notFound('member')
      this.assertMayChange(principal, target)
      if (target.role === 'owner') await this.assertAnotherOwner(tx, principal.organizationId)
      await deleteMember(tx, { organizationId: principal.organizationId, userId })
    })
  }

  private assertMayChange(principal: Principal, target: UserRow) {
    assertWithinCredential(principal, target.role, 'change a member with')
  }

  private async assertAnotherOwner(tx: Parameters<typeof countOwners>[0], organizationId: string) {
    if ((await countOwners(tx, organizationId)) <= 1) {
      throw new AppError(
        'last_owner',
        'the organization must keep at least one owner; make someone else owner first',
      )
    }
  }
}
