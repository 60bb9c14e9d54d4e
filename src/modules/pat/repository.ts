import { and, desc, eq, isNull, lt } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { personalAccessTokens } from '../../db/schema'

export type PatRow = typeof personalAccessTokens.$inferSelect

export async function insertPat(
  db: Database,
  values: typeof personalAccessTokens.$inferInsert,
): Promise<PatRow> {
  const [row] = await db.insert(personalAccessTokens).values(values).returning()
  return row!
}

/** The user's live (not revoked) tokens, newest first; `limit + 1` rows for the pager. */
export function listUserPats(
  db: Database,
  options: { userId: string; organizationId: string; beforeId?: string; limit: number },
): Promise<PatRow[]> {
  const conditions = [
    eq(personalAccessTokens.userId, options.userId),
    eq(personalAccessTokens.organizationId, options.organizationId),
    isNull(personalAccessTokens.revokedAt),
  ]
  if (options.beforeId) conditions.push(lt(personalAccessTokens.id, options.beforeId))
  return db
    .select()
    .from(personalAccessTokens)
    .where(and(...conditions))
    .orderBy(desc(personalAccessTokens.id))
    .limit(options.limit + 1)
}

/**
 * Marks the user's token revoked; false when there is no such live token of this user. The
 * credential lookup reads `revoked_at` on every request, so every replica refuses the token from
 * the next request on: there is no cache to invalidate.
 */
export async function revokeUserPat(
  db: Database,
  options: { userId: string; organizationId: string; tokenId: string; at: Date },
): Promise<boolean> {
  const rows = await db
    .update(personalAccessTokens)
    .set({ revokedAt: options.at })
    .where(
      and(
        eq(personalAccessTokens.id, options.tokenId),
        eq(personalAccessTokens.userId, options.userId),
        eq(personalAccessTokens.organizationId, options.organizationId),
        isNull(personalAccessTokens.revokedAt),
      ),
    )
    .returning({ id: personalAccessTokens.id })
  return rows.length > 0
}
