import { and, count, desc, eq, lt } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { organizations, users } from '../../db/schema'
import type { Queryable, UserRow } from '../auth/repository'

export function listMembers(
  db: Database,
  options: { organizationId: string; beforeId?: string; limit: number },
): Promise<UserRow[]> {
  const conditions = [eq(users.organizationId, options.organizationId)]
  if (options.beforeId) conditions.push(lt(users.id, options.beforeId))
  return db
    .select()
    .from(users)
    .where(and(...conditions))
    .orderBy(desc(users.id))
    .limit(options.limit + 1)
}

/**
 * Locks the organization row for the rest of the transaction. Role changes and removals in one
 * organization then run one after the other, so two owners demoting each other at the same time
 * cannot both pass the "another owner remains" check.
 */
export async function lockOrganization(tx: Queryable, organizationId: string): Promise<void> {
  await tx
    .select({ id: organizations.id })
    .from(organizations)
    .where(eq(organizations.id, organizationId))
    .for('update')
}

export async function countOwners(tx: Queryable, organizationId: string): Promise<number> {
  const [row] = await tx
    .select({ owners: count() })
    .from(users)
    .where(and(eq(users.organizationId, organizationId), eq(users.role, 'owner')))
  return Number(row?.owners ?? 0)
}

export async function updateMemberRole(
  tx: Queryable,
  options: { organizationId: string; userId: string; role: string; at: Date },
): Promise<UserRow | undefined> {
  const [row] = await tx
    .update(users)
    .set({ role: options.role, updatedAt: options.at })
    .where(and(eq(users.id, options.userId), eq(users.organizationId, options.organizationId)))
    .returning()
  return row
}

/** Sessions and PATs of the user go with it (foreign keys cascade): access ends at once. */
export async function deleteMember(tx: Queryable, options: { organizationId: string; userId: string }) {
  await tx
    .delete(users)
    .where(and(eq(users.id, options.userId), eq(users.organizationId, options.organizationId)))
}
