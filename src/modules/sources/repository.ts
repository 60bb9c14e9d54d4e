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

  /**
   * Deletes the source: first its delivery log, then its leads' link to it, each one statement
   * without the source's lock, then its row, whose triggers (drizzle/functions/
   * webhook_sources_release_rows.sql) do the rest under the lock: what was written meanwhile, its
   * window, its queued events' messages. In one statement, the delete held the source's writers for
   * as long as the log took to delete (4.1 s for 1,000,000 entries and 100,000 leads on the
   * twenty-ninth session's machine), and with them every group of leads holding one of theirs: with
   * DATABASE_LOCK_TIMEOUT_MS, a 503 for all of them. Now the log (1.3 s) and the leads (3.7 s) go
   * without the lock and the writers wait for the row's statement only (0.54 s, most of it the
   * triggers' walk over the log's entries just deleted). Deleting in batches of 10,000 instead took
   * 60 s for the same source: each batch walked the entries the batches before it had left dead in
   * the index. A delete that fails halfway leaves the source with part of its log gone and some of
   * its leads released; repeating it finishes the job.
   */
  async delete(organizationId: string, id: string): Promise<boolean> {
    const [owned] = await this.ctx.db
      .select({ id: webhookSources.id })
      .from(webhookSources)
      .where(and(eq(webhookSources.organizationId, organizationId), eq(webhookSources.id, id)))
    if (!owned) return false
    // the whole source: a walk of its range of the index is the plan wanted here
    await this.ctx.db.execute(sql`DELETE FROM delivery_logs WHERE source_id = ${id}::uuid`)
    await this.ctx.db.execute(sql`UPDATE leads SET source_id = NULL WHERE source_id = ${id}::uuid`)
    const rows = await this.ctx.db
      .delete(webhookSources)
      .where(and(eq(webhookSources.organizationId, organizationId), eq(webhookSources.id, id)))
      .returning({ id: webhookSources.id })
    return rows.length > 0
  }
}
