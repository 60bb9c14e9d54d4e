import type { AppContext } from '../../context'
import { isDatabaseUnavailable } from '../../lib/errors'
import { newId } from '../../lib/ids'
import type { DeliverySignal } from '../webhook-endpoints/signal'
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

const GROUP_SQL = 'select idx, lead_id, outcome, webhook_events from ingest_leads($1::jsonb)'
const LOG_SQL = 'select log_deliveries($1::jsonb) as written'
/** Bounds one group's statement (about 1 MB of JSON at most; a group of inbound bodies is small). */
const MAX_GROUP_SIZE = 200

/**
 * The source was deleted after the request found it in the cache: nothing was written for it
 * (drizzle/0009: writers hold the source, and skip it once it is gone).
 */
export class SourceGoneError extends Error {
  constructor(readonly sourceId: string) {
    super(`source ${sourceId} no longer exists`)
    this.name = 'SourceGoneError'
  }
}

export interface IngestResult {
  leadId: string
  outcome: 'created' | 'updated'
}

interface IngestItem extends RequestColumns {
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

/** The request's facts as ingest_leads() and log_deliveries() read them (drizzle/0007, 0009). */
function requestColumns(facts: RequestFacts) {
  return {
    received_at: facts.receivedAt.toISOString(),
    client_ip: facts.clientIp,
    origin: facts.origin,
    user_agent: facts.userAgent,
    body_bytes: facts.bodyBytes,
    body: facts.body,
    body_truncated: facts.bodyTruncated,
    duration_ms: facts.durationMs,
  }
}
type RequestColumns = ReturnType<typeof requestColumns>

interface Waiting {
  item: IngestItem
  /** Its dedup keys (dedupKeys), computed once when queued. */
  keys: string[]
  resolve(result: IngestResult): void
  reject(error: unknown): void
}

/** The keys two submissions of one person share: organization + e-mail, organization + phone. */
function dedupKeys(item: IngestItem): string[] {
  const keys: string[] = []
  if (item.email_normalized !== null) keys.push(`${item.organization_id}:e:${item.email_normalized}`)
  if (item.phone_e164 !== null) keys.push(`${item.organization_id}:p:${item.phone_e164}`)
  return keys
}

export class InboundRepository {
  private queue: Waiting[] = []
  private flushScheduled = false
  private inFlight = 0
  /** Dedup keys of the groups being written, with how many groups hold each. */
  private readonly keysInFlight = new Map<string, number>()
  private readonly maxInFlight: number
  /** Statements written: groups, the leads they carried, single writes, and groups retried one by one. */
  readonly stats = { groups: 0, groupedLeads: 0, singles: 0, groupFallbacks: 0 }

  constructor(
    private readonly ctx: AppContext,
    private readonly signal: DeliverySignal,
  ) {
    // As many groups in flight as the pool has connections; PGlite has one.
    this.maxInFlight = ctx.database.engine === 'pglite' ? 1 : ctx.config.databasePoolSize
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
      ...requestColumns(facts),
    }
    return new Promise<IngestResult>((resolve, reject) => {
      this.queue.push({ item, keys: dedupKeys(item), resolve, reject })
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
      // Everything queued belongs to people whose earlier submission is still being written.
      if (group.length === 0) return
      const keys = group.flatMap((waiting) => waiting.keys)
      for (const key of keys) this.keysInFlight.set(key, (this.keysInFlight.get(key) ?? 0) + 1)
      this.inFlight++
      void this.write(group).finally(() => {
        this.inFlight--
        for (const key of keys) {
          const left = this.keysInFlight.get(key)! - 1
          if (left === 0) this.keysInFlight.delete(key)
          else this.keysInFlight.set(key, left)
        }
        if (this.queue.length > 0) this.scheduleFlush()
      })
    }
  }

  /**
   * The next group, in arrival order. One statement looks a whole group up in one snapshot, so two
   * submissions of the same person (a shared dedup key) never share a group; and groups run
   * concurrently on several connections, so a submission also waits while an earlier one of the
   * same person is being written: each person's submissions are applied in the order they arrived.
   * A lead left in the queue holds back every later lead that shares a key with it.
   */
  private takeGroup(): Waiting[] {
    const group: Waiting[] = []
    const claimed = new Set<string>()
    const left: Waiting[] = []
    let next = 0
    for (; next < this.queue.length && group.length < MAX_GROUP_SIZE; next++) {
      const waiting = this.queue[next]!
      const held = waiting.keys.some((key) => claimed.has(key) || this.keysInFlight.has(key))
      for (const key of waiting.keys) claimed.add(key)
      if (held) left.push(waiting)
      else group.push(waiting)
    }
    this.queue = next === this.queue.length ? left : left.concat(this.queue.slice(next))
    return group
  }

  private async write(group: Waiting[]): Promise<void> {
    group.forEach((waiting, index) => {
      waiting.item.idx = index
    })
    let rows: Array<{
      idx: number
      lead_id: string
      outcome: IngestResult['outcome']
      webhook_events: boolean
    }>
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
    // The group's webhook events (if its organization has endpoints) are committed: this replica's
    // worker sends them at once.
    if (rows[0]?.webhook_events) this.signal.wake()
    const answered = new Set<number>()
    for (const row of rows) {
      answered.add(row.idx)
      group[row.idx]!.resolve({ leadId: row.lead_id, outcome: row.outcome })
    }
    // The function returns no row for an item whose source was deleted meanwhile.
    if (answered.size < group.length) {
      for (const waiting of group) {
        if (!answered.has(waiting.item.idx)) waiting.reject(new SourceGoneError(waiting.item.source_id))
      }
    }
  }

  /** One delivery-log entry that stores no lead; skipped when its source is gone. */
  async insertLog(entry: DeliveryLogEntry): Promise<void> {
    await this.insertLogs([entry])
  }

  /** Several entries in one statement (log_deliveries, drizzle/0009); those of a deleted source are skipped. */
  async insertLogs(entries: DeliveryLogEntry[]): Promise<void> {
    if (entries.length === 0) return
    const items = entries.map((entry) => ({
      id: newId(),
      source_id: entry.sourceId,
      organization_id: entry.organizationId,
      method: entry.method,
      http_status: entry.httpStatus,
      outcome: entry.outcome,
      reason: entry.reason,
      spam_reasons: entry.spamReasons,
      repeat_count: entry.repeatCount ?? 1,
      ...requestColumns(entry),
    }))
    await this.ctx.database.query(LOG_SQL, [JSON.stringify(items)])
  }
}
