import { and, eq } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { organizations, sessions, users } from '../../db/schema'
import { isUniqueViolation } from '../../db/unique-violation'
import { AppError } from '../../lib/errors'

export type OrganizationRow = typeof organizations.$inferSelect
export type UserRow = typeof users.$inferSelect
/** A transaction or the database itself: the queries below run in either. */
export type Queryable = Pick<Database, 'select' | 'insert' | 'update' | 'delete' | 'execute'>

export async function insertOrganization(
  db: Queryable,
  values: { id: string; name: string; plan: string; at: Date },
): Promise<OrganizationRow> {
  const [row] = await db
    .insert(organizations)
    .values({
      id: values.id,
      name: values.name,
      plan: values.plan,
      createdAt: values.at,
      updatedAt: values.at,
    })
    .returning()
  return row!
}

export async function insertUser(
  db: Queryable,
  values: { id: string; organizationId: string; email: string; passwordHash: string; role: string; at: Date },
): Promise<UserRow> {
  try {
    const [row] = await db
      .insert(users)
      .values({
        id: values.id,
        organizationId: values.organizationId,
        email: values.email,
        passwordHash: values.passwordHash,
        role: values.role,
        createdAt: values.at,
        updatedAt: values.at,
      })
      .returning()
    return row!
  } catch (error) {
    if (isUniqueViolation(error, 'users_email_unique')) {
      throw new AppError('email_taken', 'a user with this e-mail address already exists')
    }
    throw error
  }
}

export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  const [row] = await db.select().from(users).where(eq(users.email, email)).limit(1)
  return row
}

export async function findUserInOrganization(
  db: Queryable,
  organizationId: string,
  userId: string,
): Promise<UserRow | undefined> {
  const [row] = await db
    .select()
    .from(users)
    .where(and(eq(users.id, userId), eq(users.organizationId, organizationId)))
    .limit(1)
  return row
}

export async function findOrganization(db: Queryable, id: string): Promise<OrganizationRow | undefined> {
  const [row] = await db.select().from(organizations).where(eq(organizations.id, id)).limit(1)
  return row
}

export async function updateOrganizationPlan(
  db: Queryable,
  id: string,
  plan: string,
  at: Date,
): Promise<OrganizationRow | undefined> {
  const [row] = await db
    .update(organizations)
    .set({ plan, updatedAt: at })
    .where(eq(organizations.id, id))
    .returning()
  return row
}

export async function insertSession(
  db: Queryable,
  values: { id: string; userId: string; tokenDigest: string; at: Date; expiresAt: Date },
): Promise<void> {
  await db.insert(sessions).values({
    id: values.id,
    userId: values.userId,
    tokenDigest: values.tokenDigest,
    createdAt: values.at,
    lastUsedAt: values.at,
    expiresAt: values.expiresAt,
  })
}

export async function deleteSession(db: Queryable, id: string): Promise<void> {
  await db.delete(sessions).where(eq(sessions.id, id))
}
