import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { newId } from '../../lib/ids'
import {
  type RequestColumns,
  type RequestFacts,
  requestColumns,
  type WindowVerdict,
  type WindowVerdictRow,
  windowVerdict,
} from '../delivery-logs/log-writer'
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
  /**
   * The submission's delivery-log entry; a lead it creates takes the same id, and so does that
   * lead's `lead.created` message (leads_keep_event_snapshot finds the message by it).
   */
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

/**
 * A row of ingest_leads(): none for an item whose source was deleted meanwhile. An item over its
 * key's limit is `rate_limited`, with no lead (nothing of it was written).
 */
export type IngestRow = {
  idx: number
  /** The group queued webhook events (its organization has endpoints). */
  webhook_events: boolean
  /** The key's window after the item: the X-RateLimit headers (key-limit.ts). */
  remaining: number
  reset_ms: number
} & (
  | { lead_id: string; outcome: Extract<Outcome, 'created' | 'updated'> }
  | { lead_id: null; outcome: 'rate_limited' }
)

/** A request on a webhook URL that counts against its key and writes nothing when admitted. */
export interface CountedRequest {
  sourceId: string
  receivedAt: Date
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
 * on every call. With INGEST_PIPELINE a large group runs on the group commit's own connection,
 * where the next may be pipelined behind it (`DatabaseHandle.pipeline`); every other group on the
 * pool, where its one parameter, JSON text, a scalar, sends it through Bun.sql with
 * DATABASE_DRIVER=bun-sql (src/db/bun-sql.ts). The function it calls:
 * drizzle/functions/ingest_leads.sql.
 */
const INGEST_SQL =
  'select idx, lead_id, outcome, webhook_events, remaining, reset_ms from ingest_leads($1::jsonb)'

/** The inbound statements. The group-commit writer (group-commit.ts) decides what goes together. */
export class InboundRepository {
  constructor(private readonly ctx: AppContext) {}

  /**
   * Dedup + insert or update + delivery-log entry of every item, in one transaction. A group whose
   * items share a dedup key is refused whole (LC409): the writer never forms one. `pipelined`: on
   * the group commit's own connection, behind whatever group runs there.
   */
  ingestLeads(items: readonly IngestItem[], pipelined = false): Promise<IngestRow[]> {
    const params = [JSON.stringify(items)]
    const pipeline = pipelined ? this.ctx.database.pipeline : null
    return pipeline
      ? pipeline.query<IngestRow>(INGEST_SQL, params)
      : this.ctx.database.query<IngestRow>(INGEST_SQL, params)
  }

  /**
   * The per-key limit for a preflight or an informational GET (count_inbound_requests): its verdict,
   * or null when the source was deleted meanwhile. Not on the accepted path: a `sql` template.
   */
  async countRequest(request: CountedRequest): Promise<WindowVerdict | null> {
    const items = [{ idx: 0, source_id: request.sourceId, received_at: request.receivedAt.toISOString() }]
    const [row] = await sqlRows<WindowVerdictRow>(
      this.ctx.db,
      sql`select idx, allowed, remaining, reset_ms from count_inbound_requests(${JSON.stringify(items)}::jsonb)`,
    )
    return row ? windowVerdict(row) : null
  }
}
