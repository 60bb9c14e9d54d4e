import type { AppContext } from '../../context'
import { newId } from '../../lib/ids'
import { type RequestColumns, type RequestFacts, requestColumns } from '../delivery-logs/log-writer'
import type { Outcome } from '../delivery-logs/model'
import type { NormalizedLead } from './normalize'

/**
 * One accepted lead as ingest_leads() (drizzle/functions/ingest_leads.sql) reads it: the lead, its
 * dedup keys, its delivery-log entry.
 */
export interface IngestItem extends RequestColumns {
  /** Its position in the group, set when the group is written; rows come back with it. */
  idx: number
  organization_id: string
  source_id: string
  new_lead_id: string
  log_id: string
  first_name: string | null
  last_name: string | null
  email: string | null
  email_normalized: string | null
  phone_raw: string | null
  phone_e164: string | null
  status: string | null
  custom_fields: Record<string, unknown>
  attribution: Record<string, unknown>
}

/** A row of ingest_leads(): none for an item whose source was deleted meanwhile. */
export interface IngestRow {
  idx: number
  lead_id: string
  outcome: Extract<Outcome, 'created' | 'updated'>
  /** The group queued webhook events (its organization has endpoints). */
  webhook_events: boolean
}

export function ingestItem(
  source: { id: string; organizationId: string },
  lead: NormalizedLead,
  facts: RequestFacts,
): IngestItem {
  return {
    idx: 0,
    organization_id: source.organizationId,
    source_id: source.id,
    new_lead_id: newId(),
    log_id: newId(),
    first_name: lead.firstName,
    last_name: lead.lastName,
    email: lead.email,
    email_normalized: lead.emailNormalized,
    phone_raw: lead.phoneRaw,
    phone_e164: lead.phoneE164,
    status: lead.status,
    custom_fields: lead.customFields,
    attribution: lead.attribution,
    ...requestColumns(facts),
  }
}

/**
 * The hot path's one statement, as raw text on purpose (the one exception to docs/architecture.md
 * "Speaking SQL"): it is sent as-is and prepared once per connection (DatabaseHandle.query), where
 * Drizzle's `sql` template builds the query and sends an unnamed statement that PostgreSQL parses
 * on every call. Its one parameter is JSON text, a scalar, so with DATABASE_DRIVER=bun-sql it runs
 * on Bun.sql (src/db/bun-sql.ts). The function it calls: drizzle/functions/ingest_leads.sql.
 */
const INGEST_SQL = 'select idx, lead_id, outcome, webhook_events from ingest_leads($1::jsonb)'

/** The inbound statements. The group-commit writer (group-commit.ts) decides what goes together. */
export class InboundRepository {
  constructor(private readonly ctx: AppContext) {}

  /**
   * Dedup + insert or update + delivery-log entry of every item, in one transaction. A group whose
   * items share a dedup key is refused whole (LC409): the writer never forms one.
   */
  ingestLeads(items: readonly IngestItem[]): Promise<IngestRow[]> {
    return this.ctx.database.query<IngestRow>(INGEST_SQL, [JSON.stringify(items)])
  }
}
