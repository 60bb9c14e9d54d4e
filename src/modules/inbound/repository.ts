import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { deliveryLogs } from '../../db/schema'
import { newId } from '../../lib/ids'
import type { NormalizedLead } from './normalize'

/** A delivery-log entry for an inbound request that did not store a lead. */
export interface DeliveryLogEntry {
  sourceId: string
  organizationId: string
  receivedAt: Date
  method: string
  httpStatus: number
  outcome: 'spam' | 'error' | 'rejected'
  reason: string | null
  clientIp: string
  origin: string | null
  userAgent: string | null
  bodyBytes: number
  body: string | null
  bodyTruncated: boolean
  spamReasons: string[]
  durationMs: number
  repeatCount?: number
}

export interface RequestFacts {
  receivedAt: Date
  clientIp: string
  origin: string | null
  userAgent: string | null
  bodyBytes: number
  body: string | null
  bodyTruncated: boolean
  durationMs: number
}

// The function adds its own execution time to the duration measured before the call.
const INGEST_SQL = `select lead_id, outcome from ingest_lead($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb,
  $13::jsonb, $14, $15, $16, $17, $18, $19, $20, $21)`

export class InboundRepository {
  private readonly insertLogStatement

  constructor(private readonly ctx: AppContext) {
    this.insertLogStatement = ctx.db
      .insert(deliveryLogs)
      .values({
        id: sql.placeholder('id'),
        sourceId: sql.placeholder('sourceId'),
        organizationId: sql.placeholder('organizationId'),
        receivedAt: sql.placeholder('receivedAt'),
        method: sql.placeholder('method'),
        httpStatus: sql.placeholder('httpStatus'),
        outcome: sql.placeholder('outcome'),
        reason: sql.placeholder('reason'),
        clientIp: sql.placeholder('clientIp'),
        origin: sql.placeholder('origin'),
        userAgent: sql.placeholder('userAgent'),
        bodyBytes: sql.placeholder('bodyBytes'),
        body: sql.placeholder('body'),
        bodyTruncated: sql.placeholder('bodyTruncated'),
        spamReasons: sql.placeholder('spamReasons'),
        durationMs: sql.placeholder('durationMs'),
        repeatCount: sql.placeholder('repeatCount'),
      })
      .prepare('inbound_insert_delivery_log')
  }

  /** Dedup + insert or update + delivery log, in one statement (see drizzle/0001_ingest_lead_function.sql). */
  async ingest(
    source: { id: string; organizationId: string },
    lead: NormalizedLead,
    facts: RequestFacts,
  ): Promise<{ leadId: string; outcome: 'created' | 'updated' }> {
    const [row] = await this.ctx.database.query<{ lead_id: string; outcome: 'created' | 'updated' }>(
      INGEST_SQL,
      [
        source.organizationId,
        source.id,
        newId(),
        newId(),
        lead.firstName,
        lead.lastName,
        lead.email,
        lead.emailNormalized,
        lead.phoneRaw,
        lead.phoneE164,
        lead.status,
        JSON.stringify(lead.customFields),
        JSON.stringify(lead.attribution),
        facts.receivedAt.toISOString(),
        facts.clientIp,
        facts.origin,
        facts.userAgent,
        facts.bodyBytes,
        facts.body,
        facts.bodyTruncated,
        facts.durationMs,
      ],
    )
    if (!row) throw new Error('ingest_lead returned no row')
    return { leadId: row.lead_id, outcome: row.outcome }
  }

  async insertLog(entry: DeliveryLogEntry): Promise<void> {
    await this.insertLogStatement.execute({ ...entry, id: newId(), repeatCount: entry.repeatCount ?? 1 })
  }

  async insertLogs(entries: DeliveryLogEntry[]): Promise<void> {
    if (entries.length === 0) return
    await this.ctx.db
      .insert(deliveryLogs)
      .values(entries.map((entry) => ({ ...entry, id: newId(), repeatCount: entry.repeatCount ?? 1 })))
  }
}
