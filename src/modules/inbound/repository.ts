import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { deliveryLogs } from '../../db/schema'
import { isDatabaseUnavailable } from '../../lib/errors'
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

/** What the lead's delivery-log entry records about the request. */
export type RequestFacts = Pick<
  DeliveryLogEntry,
  'receivedAt' | 'clientIp' | 'origin' | 'userAgent' | 'bodyBytes' | 'body' | 'bodyTruncated' | 'durationMs'
>

const GROUP_SQL = 'select idx, lead_id, outcome from ingest_leads($1::jsonb)'
/** Bounds one group's statement (about 1 MB of JSON at most; a group of inbound bodies is small). */
const MAX_GROUP_SIZE = 200

export interface IngestResult {
  leadId: string
  outcome: 'created' | 'updated'
}

interface IngestItem {
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
  received_at: string
  client_ip: string
  origin: string | null
  user_agent: string | null
  body_bytes: number
  body: string | null
  body_truncated: boolean
  duration_ms: number
}

interface Waiting {
  item: IngestItem
  resolve(result: IngestResult): void
  reject(error: unknown): void
}

export class InboundRepository {
  private readonly insertLogStatement
  private queue: Waiting[] = []
  private flushScheduled = false
  private inFlight = 0
  private readonly maxInFlight: number
  /** Statements written: groups, the leads they carried, single writes, and groups retried one by one. */
  readonly stats = { groups: 0, groupedLeads: 0, singles: 0, groupFallbacks: 0 }

  constructor(private readonly ctx: AppContext) {
    // As many groups in flight as the pool has connections; PGlite has one.
    this.maxInFlight = ctx.database.engine === 'pglite' ? 1 : ctx.config.databasePoolSize
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

  /**
   * Dedup + insert or update + delivery log for one accepted lead, resolved after commit. Leads
   * that arrive in the same event-loop turn, or while every connection is busy, are written
   * together by one statement (group commit; drizzle/0003_ingest_leads_batch.sql): under load
   * that is one round trip and one commit for many requests, and for a lone request it is a
   * single call with no added wait.
   */
  ingest(
    source: { id: string; organizationId: string },
    lead: NormalizedLead,
    facts: RequestFacts,
  ): Promise<IngestResult> {
    const item: IngestItem = {
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
      received_at: facts.receivedAt.toISOString(),
      client_ip: facts.clientIp,
      origin: facts.origin,
      user_agent: facts.userAgent,
      body_bytes: facts.bodyBytes,
      body: facts.body,
      body_truncated: facts.bodyTruncated,
      duration_ms: facts.durationMs,
    }
    return new Promise<IngestResult>((resolve, reject) => {
      this.queue.push({ item, resolve, reject })
      this.scheduleFlush()
    })
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return
    this.flushScheduled = true
    setImmediate(() => {
      this.flushScheduled = false
      this.flush()
    })
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const group = this.takeGroup()
      this.inFlight++
      void this.write(group).finally(() => {
        this.inFlight--
        if (this.queue.length > 0) this.scheduleFlush()
      })
    }
  }

  /**
   * The next group, in arrival order, leaving in the queue any lead that shares a dedup key with
   * one already taken: one statement looks a whole group up in one snapshot, so two submissions of
   * the same person must be in different groups (whose locks then order them).
   */
  private takeGroup(): Waiting[] {
    const group: Waiting[] = []
    const keys = new Set<string>()
    const left: Waiting[] = []
    let next = 0
    for (; next < this.queue.length && group.length < MAX_GROUP_SIZE; next++) {
      const waiting = this.queue[next]!
      const { organization_id, email_normalized, phone_e164 } = waiting.item
      const emailKey = email_normalized === null ? null : `${organization_id}:e:${email_normalized}`
      const phoneKey = phone_e164 === null ? null : `${organization_id}:p:${phone_e164}`
      if ((emailKey && keys.has(emailKey)) || (phoneKey && keys.has(phoneKey))) {
        left.push(waiting)
        continue
      }
      if (emailKey) keys.add(emailKey)
      if (phoneKey) keys.add(phoneKey)
      group.push(waiting)
    }
    this.queue = next === this.queue.length ? left : left.concat(this.queue.slice(next))
    return group
  }

  private async write(group: Waiting[]): Promise<void> {
    group.forEach((waiting, index) => {
      waiting.item.idx = index
    })
    let rows: Array<{ idx: number; lead_id: string; outcome: IngestResult['outcome'] }>
    try {
      rows = await this.ctx.database.query(GROUP_SQL, [JSON.stringify(group.map((waiting) => waiting.item))])
    } catch (error) {
      if (group.length === 1 || isDatabaseUnavailable(error)) {
        for (const waiting of group) waiting.reject(error)
        return
      }
      // A deadlock with another group (two leads updated in crossing order), or one item the
      // database refused: nothing of the group was committed, so each lead is written on its own and
      // fails, if at all, alone.
      this.stats.groupFallbacks++
      this.ctx.logger.warn('group write failed; writing its leads one by one', { error, size: group.length })
      await Promise.all(group.map((waiting) => this.write([waiting])))
      return
    }
    if (group.length === 1) this.stats.singles++
    else {
      this.stats.groups++
      this.stats.groupedLeads += group.length
    }
    for (const row of rows) group[row.idx]!.resolve({ leadId: row.lead_id, outcome: row.outcome })
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
