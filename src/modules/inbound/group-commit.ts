import type { AppContext } from '../../context'
import { describeDatabaseError, isTransactionConflict } from '../../lib/errors'
import { STALL_LOG_MS } from '../../lib/stall-probe'
import { withTimeout } from '../../lib/timeout'
import type { RequestFacts } from '../delivery-logs/log-writer'
import type { DeliverySignal } from '../webhook-endpoints/signal'
import type { KeyVerdict } from './key-limit'
import type { NormalizedLead } from './normalize'
import type { InboundPressure } from './pressure'
import { type InboundRepository, type IngestItem, type IngestRow, ingestItem } from './repository'

/** Bounds one group's statement (about 1 MB of JSON at most; a group of inbound bodies is small). */
const MAX_GROUP_SIZE = 200

/**
 * The group commit's own connection is for groups of at least this many leads (a saturated
 * replica's), and nothing smaller is pipelined behind them; smaller groups go on the pool and the
 * next waits for them to commit, as without a pipeline. At 1,000 leads/s most groups are one lead:
 * a lead sent behind every running one kept them at one lead each (each call's fixed cost paid per
 * lead; open-loop p99 26 against 19 ms, docs/benchmarks.md A18), and postgres.js, the connection's
 * client, answered a lone group later than Bun.sql (p50 +~1 ms, A19).
 */
const PIPELINED_GROUP_MIN = 16

/**
 * The source was deleted after the request found it in the cache: nothing was written for it
 * (writers hold the source, and skip it once it is gone).
 */
export class SourceGoneError extends Error {
  constructor(readonly sourceId: string) {
    super(`source ${sourceId} no longer exists`)
    this.name = 'SourceGoneError'
  }
}

/**
 * The database did not answer a group within INGEST_ANSWER_TIMEOUT_MS. Its code is one of the
 * connection codes src/lib/errors.ts counts as "cannot serve now": its leads are answered 503 with
 * Retry-After. Whether the statement committed is unknown (a slow server may still commit it): a
 * sender's retry of such a lead is merged with it by the dedup rules, never stored twice.
 */
export class DatabaseAnswerTimeoutError extends Error {
  readonly code = 'ANSWER_TIMEOUT'

  constructor(readonly timeoutMs: number) {
    super(`the database did not answer within ${timeoutMs} ms`)
    this.name = 'DatabaseAnswerTimeoutError'
  }
}

/**
 * What the group commit did with one lead: stored it (created or updated), or refused it because
 * its key was over the limit (nothing written). Either way the key's window after it.
 */
export type IngestResult = { verdict: KeyVerdict } & (
  | { outcome: 'created' | 'updated'; leadId: string }
  | { outcome: 'rate_limited'; leadId: null }
)

interface Waiting {
  item: IngestItem
  /** Its dedup keys (dedupKeys), computed once when queued. */
  keys: string[]
  /** performance.now() when queued; only with DIAGNOSE_STALLS (0 otherwise). */
  queuedAt: number
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

/**
 * Group commit of accepted leads (docs/architecture.md). Leads that arrive in the same event-loop
 * turn, or while every connection is busy, are written together by one ingest_leads() call
 * (drizzle/functions/ingest_leads.sql): under
 * load that is one round trip and one commit for many requests, and for a lone request it is a
 * single call with no added wait. Each lead's promise resolves after the commit.
 */
export class GroupCommitWriter {
  private queue: Waiting[] = []
  private flushScheduled = false
  private inFlight = 0
  /** The leads of the groups in flight. */
  private leadsInFlight = 0
  /** The groups in flight on the group commit's own connection. */
  private onPipeline = 0
  /** Dedup keys of the groups being written, with how many groups hold each. */
  private readonly keysInFlight = new Map<string, number>()
  private readonly maxInFlight: number
  /**
   * A group of PIPELINED_GROUP_MIN or more runs on the group commit's own connection and the next
   * may be pipelined behind it (`DatabaseHandle.pipeline`): INGEST_PIPELINE=true with
   * INGEST_GROUPS_IN_FLIGHT=1 on PostgreSQL with a pool of 3 or more.
   */
  private readonly hasPipeline: boolean
  /**
   * With DIAGNOSE_STALLS (bench/stall-timeline.ts): a group whose statement took this long, or whose
   * oldest lead waited this long before it was sent, is logged, so the open-loop tail can be split
   * into the wait for a group, the statement, and the rest. Null: not measured.
   */
  private readonly slowStatementMs: number | null

  constructor(
    private readonly ctx: AppContext,
    private readonly repository: InboundRepository,
    private readonly signal: DeliverySignal,
    /** Told how many leads wait here: the delivery worker defers while many do. */
    private readonly pressure: InboundPressure,
    options: { slowStatementMs?: number } = {},
  ) {
    this.slowStatementMs = ctx.config.diagnoseStalls ? (options.slowStatementMs ?? STALL_LOG_MS) : null
    // INGEST_GROUPS_IN_FLIGHT groups running at a time (default 1: the next group fills while one
    // is written), never more than connections send them (DatabaseHandle.queryConcurrency: PGlite
    // has one, bun-sql its share of the pool). With one, a second group may wait pipelined behind
    // the running one on the group commit's connection (maySend).
    this.hasPipeline = ctx.config.ingestGroupsInFlight === 1 && Boolean(ctx.database.pipeline)
    this.maxInFlight = Math.min(ctx.database.queryConcurrency, ctx.config.ingestGroupsInFlight)
  }

  /**
   * The per-key limit, then dedup + insert or update + delivery-log entry of one lead, resolved
   * after commit (ingest_leads() decides the limit in the same statement).
   */
  ingest(
    source: { id: string; organizationId: string },
    lead: NormalizedLead,
    facts: RequestFacts,
  ): Promise<IngestResult> {
    const item = ingestItem(source, lead, facts)
    return new Promise<IngestResult>((resolve, reject) => {
      const queuedAt = this.slowStatementMs === null ? 0 : performance.now()
      this.queue.push({ item, keys: dedupKeys(item), queuedAt, resolve, reject })
      this.pressure.add(1)
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

  /**
   * Whether another group may go out now: while a slot is free, and pipelined, one more behind a
   * group running on the group commit's connection once as many leads wait as it holds, and at least
   * PIPELINED_GROUP_MIN: then it is about as large as a group sent when the first commits, and the
   * database starts it the moment the first commits instead of waiting for this process to read the
   * answer and send it (its event loop busy with HTTP work meanwhile: PostgreSQL idle ~2 ms per
   * group, docs/benchmarks.md). Sent at once, it would hold whatever arrived in one turn: smaller
   * groups, more PostgreSQL CPU per lead.
   */
  private maySend(): boolean {
    if (this.inFlight < this.maxInFlight) return true
    // onPipeline is 1 only while the one group in flight runs on the group commit's connection (a
    // group on the pool goes alone, and one pipelined behind makes it 2).
    return this.onPipeline === 1 && this.queue.length >= Math.max(this.leadsInFlight, PIPELINED_GROUP_MIN)
  }

  /** Sends the waiting leads as groups while maySend; whether it sent any. */
  private flush(): boolean {
    let sent = false
    while (this.queue.length > 0 && this.maySend()) {
      const group = this.takeGroup()
      // Everything queued belongs to people whose earlier submission is still being written.
      if (group.length === 0) break
      sent = true
      const keys = group.flatMap((waiting) => waiting.keys)
      for (const key of keys) this.keysInFlight.set(key, (this.keysInFlight.get(key) ?? 0) + 1)
      // A large group, or one behind it: on the group commit's own connection.
      const pipelined = this.hasPipeline && (this.inFlight > 0 || group.length >= PIPELINED_GROUP_MIN)
      this.inFlight++
      this.leadsInFlight += group.length
      if (pipelined) this.onPipeline++
      let released = false
      // Called once the group's transaction has ended (committed or not): its connection and its
      // dedup keys are free for the next group.
      const release = () => {
        if (released) return
        released = true
        this.inFlight--
        this.leadsInFlight -= group.length
        if (pipelined) this.onPipeline--
        this.pressure.add(-group.length)
        for (const key of keys) {
          const left = this.keysInFlight.get(key)! - 1
          if (left === 0) this.keysInFlight.delete(key)
          else this.keysInFlight.set(key, left)
        }
      }
      void this.write(group, release, pipelined).finally(() => {
        release()
        if (this.queue.length > 0) this.scheduleFlush()
      })
    }
    return sent
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

  /**
   * Writes one group and answers its leads. `committed` is called once its statement has
   * committed, before any lead is answered: the next group is sent from there, and when one was
   * sent the answers wait for the next turn of the event loop. Bun.sql, the group's client by
   * default, was measured to put the statement on the socket only once the current turn's
   * JavaScript is done, and answering a group is that turn's longest work (every lead's handler
   * resumes and writes its response): answered first, the next group reached PostgreSQL ~1.2 ms
   * after it was sent at groups of 100, the database idle meanwhile (docs/benchmarks.md, "The next
   * group before the answers"). postgres.js writes a message of 1 KB or more at once: the wait costs
   * it one turn's delay of the answers.
   */
  private async write(group: Waiting[], committed?: () => void, pipelined = false): Promise<void> {
    group.forEach((waiting, index) => {
      waiting.item.idx = index
    })
    let rows: IngestRow[]
    const sentAt = this.slowStatementMs === null ? 0 : performance.now()
    try {
      rows = await this.answerWithin(
        this.repository.ingestLeads(
          group.map((waiting) => waiting.item),
          pipelined,
        ),
        group.length,
      )
      if (this.slowStatementMs !== null) this.noteSlowGroup(group, sentAt, this.slowStatementMs)
    } catch (error) {
      const failure = describeDatabaseError(error)
      const conflict = failure?.sqlstate !== undefined && isTransactionConflict(failure.sqlstate)
      if (group.length === 1 || (failure?.unavailable && !conflict)) {
        for (const waiting of group) waiting.reject(error)
        return
      }
      // A deadlock with another group (two leads updated in crossing order), or one item the
      // database refused: nothing of the group was committed, so each lead is written on its own and
      // fails, if at all, alone (a lone lead's deadlock is answered 503: sent again, it succeeds).
      this.ctx.logger.warn('group write failed; writing its leads one by one', { error, size: group.length })
      await Promise.all(group.map((waiting) => this.write([waiting])))
      return
    }
    if (committed) {
      committed()
      if (this.flush()) await new Promise<void>((resolve) => setImmediate(resolve))
    }
    // The group's webhook events (if its organization has endpoints) are committed: this replica's
    // worker sends them at once.
    if (rows[0]?.webhook_events) this.signal.wake()
    const answered = new Set<number>()
    for (const row of rows) {
      answered.add(row.idx)
      const verdict = {
        allowed: row.outcome !== 'rate_limited',
        remaining: row.remaining,
        resetMs: row.reset_ms,
      }
      group[row.idx]!.resolve(
        row.outcome === 'rate_limited'
          ? { outcome: row.outcome, leadId: null, verdict }
          : { outcome: row.outcome, leadId: row.lead_id, verdict },
      )
    }
    // The function returns no row for an item whose source was deleted meanwhile.
    if (answered.size < group.length) {
      for (const waiting of group) {
        if (!answered.has(waiting.item.idx)) waiting.reject(new SourceGoneError(waiting.item.source_id))
      }
    }
  }

  /**
   * The group's rows, or after INGEST_ANSWER_TIMEOUT_MS a DatabaseAnswerTimeoutError, and the hot
   * statements' connections replaced (DatabaseHandle.replaceHotConnections): a host that vanished
   * without closing its connections would hold the group, and with it every later lead of this
   * replica, until TCP gives up (~15 minutes) or for ever behind a proxy that keeps them open.
   * Rejecting frees the group's slot (write's caller), so the next group goes out on a new
   * connection. The statement is abandoned: how it ends is nobody's answer any more.
   */
  private answerWithin(statement: Promise<IngestRow[]>, size: number): Promise<IngestRow[]> {
    const timeoutMs = this.ctx.config.ingestAnswerTimeoutMs
    return withTimeout(statement, timeoutMs, () => {
      this.ctx.logger.error('group commit: no answer from the database', {
        timeout_ms: timeoutMs,
        size,
        connections_replaced: this.ctx.database.replaceHotConnections(),
      })
      return new DatabaseAnswerTimeoutError(timeoutMs)
    })
  }

  /** One line per slow group (DIAGNOSE_STALLS): its statement's span and its oldest lead's wait. */
  private noteSlowGroup(group: Waiting[], sentAt: number, slowMs: number): void {
    const statementMs = performance.now() - sentAt
    const waitMs = sentAt - Math.min(...group.map((waiting) => waiting.queuedAt))
    if (statementMs < slowMs && waitMs < slowMs) return
    this.ctx.logger.info('group statement slow', {
      // Epoch ms of the send: the statement spans [at, at + duration_ms], the wait [at - wait_ms, at].
      at: Math.round(performance.timeOrigin + sentAt),
      duration_ms: Math.round(statementMs * 10) / 10,
      wait_ms: Math.round(waitMs * 10) / 10,
      size: group.length,
    })
  }
}
