import type { AppContext } from '../../context'
import { decodeCursor, pageOf } from '../../lib/cursor'
import { errors } from '../../lib/errors'
import { perContext } from '../../lib/memo'
import { isRole, ROLE_RANK, type Role } from '../../lib/permissions'
import type { Principal } from '../auth/credentials'
import { findUserInOrganization, type UserRow } from '../auth/repository'
import { identityService } from '../auth/service'
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

function roleAboveOwn(message: string) {
  return errors.forbidden('role_above_own', message)
}

/**
 * Users of the caller's organization (DESIGN §4): nobody grants a role above their own or changes
 * someone ranked above them, and the last owner can be neither demoted nor removed.
 */
export class MembersService {
  constructor(private readonly ctx: AppContext) {}

  async list(principal: Principal, query: MemberListQueryInput) {
    const limit = query.limit ?? 50
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const rows = await listMembers(this.ctx.db, { organizationId: principal.organizationId, beforeId, limit })
    const page = pageOf(rows, limit)
    return { data: page.rows.map(memberView), next_cursor: page.nextCursor }
  }

  async add(principal: Principal, input: AddMemberInput): Promise<MemberView> {
    if (rankOf(input.role) > rankOf(principal.role)) {
      throw roleAboveOwn(`a ${principal.role} cannot add a member with the role "${input.role}"`)
    }
    const user = await identityService(this.ctx).createUser({
      organizationId: principal.organizationId,
      email: input.email,
      password: input.password,
      role: input.role,
    })
    return memberView(user)
  }

  async changeRole(principal: Principal, userId: string, role: Role): Promise<MemberView> {
    if (rankOf(role) > rankOf(principal.role)) {
      throw roleAboveOwn(`a ${principal.role} cannot grant the role "${role}"`)
    }
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
    if (rankOf(target.role) > rankOf(principal.role)) {
      throw roleAboveOwn(`a ${principal.role} cannot change a member whose role is "${target.role}"`)
    }
  }

  private async assertAnotherOwner(tx: Parameters<typeof countOwners>[0], organizationId: string) {
    if ((await countOwners(tx, organizationId)) <= 1) {
      throw errors.conflict(
        'last_owner',
        'the organization must keep at least one owner; make someone else owner first',
      )
    }
  }
}

export const membersService = perContext((ctx: AppContext) => new MembersService(ctx))
