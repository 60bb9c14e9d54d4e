import { and, desc, eq, lt, type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { webhookSources } from '../../db/schema'

export type SourceRow = typeof webhookSources.$inferSelect
export type NewSourceRow = typeof webhookSources.$inferInsert
export type SourceChanges = Partial<
  Pick<
    NewSourceRow,
    | 'name'
    | 'enabled'
    | 'ipAllowlist'
    | 'domainAllowlist'
    | 'fieldMapping'
    | 'defaultCountry'
    | 'spamFilter'
    | 'updatedAt'
  >
>

// Multi-row inserts of this size keep one statement under PostgreSQL's 65,535 parameter limit
// (17 columns a row) while provisioning thousands of sources in a handful of round trips.
export const INSERT_BATCH_SIZE = 1000

/** Drizzle queries on webhook_sources, always scoped to an organization. */
export class SourcesRepository {
  private readonly byIdStatement

  constructor(private readonly ctx: AppContext) {
    this.byIdStatement = ctx.db
      .select()
      .from(webhookSources)
      .where(
        and(
          eq(webhookSources.organizationId, sql.placeholder('organizationId')),
          eq(webhookSources.id, sql.placeholder('id')),
        ),
      )
      .limit(1)
      .prepare('sources_by_id')
  }

  async findById(organizationId: string, id: string): Promise<SourceRow | null> {
    const [row] = await this.byIdStatement.execute({ organizationId, id })
    return row ?? null
  }

  /** Newest first; `limit + 1` rows so the caller knows whether another page exists. */
  list(
    organizationId: string,
    options: { limit: number; beforeId?: string; enabled?: boolean },
  ): Promise<SourceRow[]> {
    const conditions: SQL[] = [eq(webhookSources.organizationId, organizationId)]
    if (options.beforeId) conditions.push(lt(webhookSources.id, options.beforeId))
    if (options.enabled !== undefined) conditions.push(eq(webhookSources.enabled, options.enabled))
    return this.ctx.db
      .select()
      .from(webhookSources)
      .where(and(...conditions))
      .orderBy(desc(webhookSources.id))
      .limit(options.limit + 1)
  }

  async insertMany(rows: NewSourceRow[]): Promise<SourceRow[]> {
    const out: SourceRow[] = []
    for (let start = 0; start < rows.length; start += INSERT_BATCH_SIZE) {
      out.push(
        ...(await this.ctx.db
          .insert(webhookSources)
          .values(rows.slice(start, start + INSERT_BATCH_SIZE))
          .returning()),
      )
    }
    return out
  }

  async update(organizationId: string, id: string, changes: SourceChanges): Promise<SourceRow | null> {
    const [row] = await this.ctx.db
      .update(webhookSources)
      .set(changes)
      .where(and(eq(webhookSources.organizationId, organizationId), eq(webhookSources.id, id)))
      .returning()
    return row ?? null
  }

  /**
   * Swaps in the new key in one statement: the right-hand sides read the row as it was, so the old
   * digest moves to previous_key_digest without a read-modify-write race between two regenerations.
   */
  async rotateKey(
    organizationId: string,
    id: string,
    key: { digest: string; hint: string; now: Date; previousKeyExpiresAt: Date | null },
  ): Promise<SourceRow | null> {
    const [row] = await this.ctx.db
      .update(webhookSources)
      .set({
        keyDigest: key.digest,
        keyHint: key.hint,
        previousKeyDigest: key.previousKeyExpiresAt ? sql`${webhookSources.keyDigest}` : null,
        previousKeyExpiresAt: key.previousKeyExpiresAt,
        keyRotatedAt: key.now,
        updatedAt: key.now,
      })
      .where(and(eq(webhookSources.organizationId, organizationId), eq(webhookSources.id, id)))
      .returning()
    return row ?? null
  }

  async delete(organizationId: string, id: string): Promise<boolean> {
    const rows = await this.ctx.db
      .delete(webhookSources)
      .where(and(eq(webhookSources.organizationId, organizationId), eq(webhookSources.id, id)))
      .returning({ id: webhookSources.id })
    return rows.length > 0
  }
}
