import { and, desc, eq, gt, ilike, lt, or, type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { leads, webhookSources } from '../../db/schema'

export type LeadRow = typeof leads.$inferSelect
export type LeadChanges = Partial<
  Pick<
    LeadRow,
    | 'firstName'
    | 'lastName'
    | 'email'
    | 'emailNormalized'
    | 'phoneRaw'
    | 'phoneE164'
    | 'status'
    | 'customFields'
    | 'updatedAt'
  >
>

export interface LeadFilters {
  limit: number
  beforeId?: string
  sourceId?: string
  createdAfter?: Date
  search?: { substring: string; emailNormalized: string; phoneE164: string | null; digits: string | null }
}

/** Drizzle queries on leads, always scoped to an organization. */
export class LeadsRepository {
  private readonly byIdStatement
  private readonly byIdWithCountryStatement

  constructor(private readonly ctx: AppContext) {
    const scoped = and(
      eq(leads.organizationId, sql.placeholder('organizationId')),
      eq(leads.id, sql.placeholder('id')),
    )
    this.byIdStatement = ctx.db.select().from(leads).where(scoped).limit(1).prepare('leads_by_id')
    this.byIdWithCountryStatement = ctx.db
      .select({ lead: leads, defaultCountry: webhookSources.defaultCountry })
      .from(leads)
      .leftJoin(webhookSources, eq(webhookSources.id, leads.sourceId))
      .where(scoped)
      .limit(1)
      .prepare('leads_by_id_with_country')
  }

  async findById(organizationId: string, id: string): Promise<LeadRow | null> {
    const [row] = await this.byIdStatement.execute({ organizationId, id })
    return row ?? null
  }

  /** The lead and its source's default country, which phone normalisation needs. */
  async findForUpdate(
    organizationId: string,
    id: string,
  ): Promise<{ lead: LeadRow; defaultCountry: string | null } | null> {
    const [row] = await this.byIdWithCountryStatement.execute({ organizationId, id })
    return row ? { lead: row.lead, defaultCountry: row.defaultCountry ?? null } : null
  }

  /** Newest first; `limit + 1` rows so the caller knows whether another page exists. */
  list(organizationId: string, filters: LeadFilters): Promise<LeadRow[]> {
    return this.ctx.db
      .select()
      .from(leads)
      .where(matching(organizationId, filters))
      .orderBy(desc(leads.id))
      .limit(filters.limit + 1)
  }

  /**
   * The list's query with only the columns the CSV export writes (`limit + 1` rows too): an
   * export of 100,000 leads turns every row into garbage, so each column not read is garbage not
   * made (the organization id, the dedup keys).
   */
  exportPage(organizationId: string, filters: LeadFilters): Promise<LeadExportRow[]> {
    return this.ctx.db
      .select(EXPORT_COLUMNS)
      .from(leads)
      .where(matching(organizationId, filters))
      .orderBy(desc(leads.id))
      .limit(filters.limit + 1)
  }

  async update(organizationId: string, id: string, changes: LeadChanges): Promise<LeadRow | null> {
    const [row] = await this.ctx.db
      .update(leads)
      .set(changes)
      .where(and(eq(leads.organizationId, organizationId), eq(leads.id, id)))
      .returning()
    return row ?? null
  }

  async delete(organizationId: string, id: string): Promise<boolean> {
    const rows = await this.ctx.db
      .delete(leads)
      .where(and(eq(leads.organizationId, organizationId), eq(leads.id, id)))
      .returning({ id: leads.id })
    return rows.length > 0
  }
}

const EXPORT_COLUMNS = {
  id: leads.id,
  sourceId: leads.sourceId,
  createdAt: leads.createdAt,
  updatedAt: leads.updatedAt,
  firstName: leads.firstName,
  lastName: leads.lastName,
  email: leads.email,
  phoneRaw: leads.phoneRaw,
  phoneE164: leads.phoneE164,
  status: leads.status,
  customFields: leads.customFields,
  attribution: leads.attribution,
}
export type LeadExportRow = Pick<LeadRow, keyof typeof EXPORT_COLUMNS>

/** The filters of the list and the export: one organization, then what the query asks for. */
function matching(organizationId: string, filters: LeadFilters): SQL | undefined {
  const conditions: SQL[] = [eq(leads.organizationId, organizationId)]
  if (filters.beforeId) conditions.push(lt(leads.id, filters.beforeId))
  if (filters.sourceId) conditions.push(eq(leads.sourceId, filters.sourceId))
  if (filters.createdAfter) conditions.push(gt(leads.createdAt, filters.createdAfter))
  const search = filters.search
  if (search) {
    const pattern = `%${escapeLike(search.substring)}%`
    const matches: SQL[] = [
      ilike(leads.email, pattern),
      ilike(leads.phoneRaw, pattern),
      eq(leads.emailNormalized, search.emailNormalized),
    ]
    if (search.phoneE164) matches.push(eq(leads.phoneE164, search.phoneE164))
    if (search.digits) matches.push(sql`${leads.phoneE164} like ${`%${search.digits}%`}`)
    conditions.push(or(...matches)!)
  }
  return and(...conditions)
}

// A search for "50%" or "a_b" means those characters, not LIKE wildcards.
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (character) => `\\${character}`)
}
