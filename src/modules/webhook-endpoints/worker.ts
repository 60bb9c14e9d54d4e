import type { AppContext } from '../../context'
import { AppError } from '../../lib/errors'
import { newId } from '../../lib/ids'
import type { InboundPressure } from '../inbound/pressure'
import { type CheckedTarget, type DeliveryEndpoint, EndpointCache } from './endpoint-cache'
import {
  type AttemptOutcome,
  type AttemptResult,
  type ClaimedDelivery,
  DeliveryQueueRepository,
} from './repository'
import type { WebhookEndpointsService } from './service'
import { type DeliverySignal, ReplicaWakeups } from './signal'

/** Waits after the 1st, 2nd… failed attempt; after the last one the message is `failed`. */
export const RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3600_000,
  5 * 3600_000,
  10 * 3600_000,
  10 * 3600_000,
] as const
/** An endpoint whose every attempt failed for this long is disabled. */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 3600_000
export const RESPONSE_BODY_KEPT_BYTES = 2048
/**
 * Requests in flight per endpoint and per replica: one slow receiver holds at most this many of the
 * replica's IN_FLIGHT_TOTAL. One endpoint's throughput is this many requests per claim-and-answer
 * cycle: with 10, a loaded 2-core machine delivered ~200-400 events/s to one fast receiver
 * (bench:webhooks), short of 1,000 leads/s.
 */
export const IN_FLIGHT_PER_ENDPOINT = 32
const IN_FLIGHT_TOTAL = 256
export const POLL_INTERVAL_MS = 1_000
// A claim's lease outlives the attempt's time limit by this much, so a live worker always records
// its result before another replica may take the delivery again.
const LEASE_MARGIN_MS = 5_000
const USER_AGENT = 'lead-capture-webhooks/1'
/**
 * A worker starts a claim, and a result write, at most once per this many milliseconds (the first
 * after a quiet spell at once): at 1,000 events/s toward a fast receiver every answer freed a slot
 * and woke a claim of its own, and every write of results found one or two waiting, so the worker
 * ran hundreds of small statements a second next to the lead path's. Spaced, each takes what came
 * due meanwhile, for at most this much more delivery lag.
 */
export const WORKER_STATEMENT_SPACING_MS = 10
/**
 * Inbound first (docs/webhooks.md): while the replica's lead path is saturated (InboundPressure),
 * the worker claims at most once per this many milliseconds, and sends lead events' first attempts
 * at most at DEFERRED_LEAD_EVENTS_PER_SECOND (the floor: the backlog always moves); alerts, pings
 * and retries still go at every claim. Each claim is a statement on a connection the leads are
 * waiting for, so fewer, later claims are the point.
 */
export const DEFERRED_CLAIM_INTERVAL_MS = 100
/**
 * Lead events fanned out to deliveries per statement (drizzle/0019): a backlog left by a saturated
 * spell is fanned out a batch per claim, so its first deliveries go before the last are written.
 */
export const FAN_OUT_BATCH = 1000
export const DEFERRED_LEAD_EVENTS_PER_SECOND = 100
/**
 * While saturated, lead events go at the floor in one batch per this interval (the rate × the
 * interval, 100), not a tenth of it at every claim: each batch's fan-out and full claim walk the
 * heads of the queue's key and of the due index, b-trees that keep an entry for every row taken or
 * claimed since the last VACUUM. With 2 million taken since (A15, docs/benchmarks.md), each walk read
 * 5,700-7,700 pages (3-10 ms) next to the saturated lead path; a batch a second walks a tenth as
 * often. Alerts, pings and retries still go at every claim (their partial index holds none of it).
 */
export const DEFERRED_LEAD_BATCH_INTERVAL_MS = 1000
const DEFERRED_LEAD_BATCH = (DEFERRED_LEAD_EVENTS_PER_SECOND * DEFERRED_LEAD_BATCH_INTERVAL_MS) / 1000

/**
 * The worker's statements in flight at once, out of the replica's DATABASE_POOL_SIZE (a quarter,
 * at least one): claims and result writes queue behind each other rather than take connections the
 * inbound path is waiting for. Claims never overlap anyway, and results are written one batch at a
 * time, so this bounds the rare rest (releases, disabling) too.
 */
export function workerStatementSlots(poolSize: number): number {
  return Math.max(1, Math.floor(poolSize / 4))
}

/**
 * The delivery worker of one replica. Fans lead events out to their endpoints' deliveries (the
 * lead's transaction wrote the message only, drizzle/0019), claims due deliveries
 * (webhook_deliveries as a SKIP LOCKED queue, so replicas never take the same one), sends each as a
 * signed Standard Webhooks request,
 * records the attempt and schedules the next. Woken at once by this replica's writes (in process)
 * and by the other replicas' (NOTIFY, signal.ts); polls every second for the rest (retries that
 * came due, leases that ran out, a notification lost while the listener reconnected).
 */
export class DeliveryWorker {
  private readonly queue: DeliveryQueueRepository
  private readonly inFlightByEndpoint = new Map<string, number>()
  private readonly attempts = new Set<Promise<void>>()
  /** Claims holding deliveries whose attempt was aborted by shutdown: handed back by stop(). */
  private readonly toRelease = new Set<string>()
  private readonly shutdown = new AbortController()
  private inFlight = 0
  private readonly results: ResultBuffer
  private readonly wakeups: ReplicaWakeups
  private readonly endpoints: EndpointCache
  private readonly statements: Slots
  private pumping: Promise<void> | null = null
  private pumpAgain = false
  private lastPumpAt = Number.NEGATIVE_INFINITY
  private spacedWake: ReturnType<typeof setTimeout> | undefined
  /** The spaced wake-up is deliverDue()'s: it does not wait for the deferred interval either. */
  private spacedNow = false
  /** The next claim while deferring; unlike spacedWake, deliverDue() does not wait for it. */
  private deferredWake: ReturnType<typeof setTimeout> | undefined
  /** When the floor's next batch of lead events may go while deferring (ctx.clock). */
  private nextFloorBatchAt = 0
  private deferring = false
  /** The last deferred claim of lead events filled its budget: more wait, claim again next tick. */
  private leadBacklog = false
  /** Lead events' first attempts the floor's last batch allows and has not claimed yet. */
  private floorOwed = 0
  private stopped = false
  private started = false

  constructor(
    private readonly ctx: AppContext,
    private readonly deps: {
      signal: DeliverySignal
      endpoints: WebhookEndpointsService
      /** The lead path's saturation: the worker defers lead events while it lasts. */
      pressure: Pick<InboundPressure, 'underPressure'>
    },
  ) {
    this.queue = new DeliveryQueueRepository(ctx)
    this.statements = new Slots(workerStatementSlots(ctx.config.databasePoolSize))
    this.results = new ResultBuffer(
      (batch) => this.statements.run(() => this.queue.record(batch)),
      WORKER_STATEMENT_SPACING_MS,
    )
    this.endpoints = new EndpointCache(ctx, this.queue)
    this.wakeups = new ReplicaWakeups(
      ctx,
      () => this.wake(),
      () => this.statements.run(() => this.queue.anyEnabledEndpoint()),
    )
  }

  /**
   * Wake-ups (this replica's writes in process, the other replicas' over LISTEN/NOTIFY); the poll
   * is a periodic job (webhookJobs). Started and stopped with the rest of the background work
   * (src/jobs.ts). Resolves once the LISTEN is in place (or has failed, to be tried again at the
   * next poll).
   */
  start(): Promise<void> {
    if (this.started) return this.wakeups.listen()
    this.started = true
    this.deps.signal.subscribe(() => {
      this.wakeups.announce()
      this.wake()
    })
    this.wake()
    return this.wakeups.listen()
  }

  /**
   * Claims and starts what is due now; never overlaps itself (a wake-up during a claim re-runs it),
   * and starts at most once per WORKER_STATEMENT_SPACING_MS (a wake-up sooner runs at its end).
   */
  wake(): void {
    this.wakeUp(false)
  }

  /** `now`: the poll's and deliverDue()'s claim, which does not wait for the deferred interval. */
  private wakeUp(now: boolean): void {
    if (this.stopped) return
    if (this.pumping) {
      this.pumpAgain = true
      return
    }
    if (this.spacedWake) {
      this.spacedNow ||= now
      return
    }
    const deferring = this.ctx.config.webhookInboundFirst && this.deps.pressure.underPressure()
    if (deferring !== this.deferring) {
      this.deferring = deferring
      // The floor starts empty at each saturated spell: its first lead events go a batch interval later.
      this.nextFloorBatchAt = this.ctx.clock.now() + DEFERRED_LEAD_BATCH_INTERVAL_MS
      this.floorOwed = 0
      this.leadBacklog = true
    }
    if (deferring && !now) {
      const wait = this.lastPumpAt + DEFERRED_CLAIM_INTERVAL_MS - performance.now()
      if (wait > 0) {
        this.wakeDeferredIn(wait)
        return
      }
    }
    const wait = this.lastPumpAt + WORKER_STATEMENT_SPACING_MS - performance.now()
    if (wait > 0) {
      this.spacedNow = now
      this.spacedWake = setTimeout(() => {
        this.spacedWake = undefined
        this.wakeUp(this.spacedNow)
      }, wait)
      return
    }
    clearTimeout(this.deferredWake)
    this.deferredWake = undefined
    this.lastPumpAt = performance.now()
    // A LISTEN that failed (database down at start-up) is tried again at every claim.
    if (this.started) void this.wakeups.listen()
    this.pumping = (deferring ? this.pumpDeferred() : this.pump())
      .catch((error) => this.ctx.logger.warn('webhook claim failed; retrying on the next poll', { error }))
      .finally(() => {
        this.pumping = null
        if (this.pumpAgain) {
          this.pumpAgain = false
          this.wake()
        }
      })
  }

  /**
   * One claim of a saturated replica: every due alert, ping and retry it has room for, then the
   * floor's lead events (a batch per batch interval). Claims again a tick later while lead events are
   * left over.
   */
  private async pumpDeferred(): Promise<void> {
    const now = this.ctx.clock.now()
    await this.claimAndStart(IN_FLIGHT_TOTAL - this.inFlight, true)
    // Lead events once per batch interval (DEFERRED_LEAD_BATCH_INTERVAL_MS): one fan-out of the batch,
    // then claims of that many first attempts over the next ticks (an endpoint takes at most
    // IN_FLIGHT_PER_ENDPOINT at a time), the oldest due first.
    const batch = Math.min(IN_FLIGHT_TOTAL - this.inFlight, DEFERRED_LEAD_BATCH)
    let fannedOutWhole = false
    if (batch > 0 && now >= this.nextFloorBatchAt) {
      // Only as many lead events as the floor sends: the rest stay queued until the spell ends.
      fannedOutWhole = (await this.fanOut(batch)) === batch
      this.nextFloorBatchAt = now + DEFERRED_LEAD_BATCH_INTERVAL_MS
      this.floorOwed += batch
    }
    const ask = Math.min(IN_FLIGHT_TOTAL - this.inFlight, this.floorOwed)
    if (ask > 0) {
      const claimed = await this.claimAndStart(ask, false)
      // None claimable (none due, or every endpoint's room taken): the rest waits for the next batch.
      this.floorOwed = claimed === 0 ? 0 : this.floorOwed - claimed
    }
    this.leadBacklog = fannedOutWhole || this.floorOwed > 0
    // Nothing is left, or the next wake-up (a new event, a freed slot, the poll) claims again.
    if (this.leadBacklog && !this.stopped) this.wakeDeferredIn(DEFERRED_CLAIM_INTERVAL_MS)
  }

  /** The deferred claim's timer, at most one at a time. */
  private wakeDeferredIn(ms: number): void {
    this.deferredWake ??= setTimeout(() => {
      this.deferredWake = undefined
      this.wake()
    }, ms)
  }

  /** For the periodic poll and for tests: claim what is due, and wait until those attempts end. */
  async deliverDue(): Promise<void> {
    this.wakeUp(true)
    while (this.pumping || this.attempts.size > 0 || this.spacedWake) {
      await this.pumping
      await Promise.allSettled([...this.attempts])
      // A wake-up spaced after the last claim: it has not started yet.
      if (!this.pumping && this.attempts.size === 0 && this.spacedWake) {
        await Bun.sleep(WORKER_STATEMENT_SPACING_MS)
      }
    }
  }

  private async pump(): Promise<void> {
    // A full batch: more lead events wait to be fanned out, after this claim has started its share.
    if ((await this.fanOut(FAN_OUT_BATCH)) === FAN_OUT_BATCH) this.pumpAgain = true
    while (!this.stopped && this.inFlight < IN_FLIGHT_TOTAL) {
      const limit = IN_FLIGHT_TOTAL - this.inFlight
      const claimed = await this.claimAndStart(limit, false)
      // Fewer than asked: everything claimable was taken (the rest waits for a slot of its
      // endpoint, whose freeing wakes the worker), so no second, empty claim.
      if (claimed < limit) return
    }
  }

  /** Lead events written as a message only, turned into deliveries; returns the messages taken. */
  private async fanOut(limit: number): Promise<number> {
    if (this.stopped) return 0
    const { messages } = await this.statements.run(() => this.queue.fanOut(limit))
    return messages
  }

  /** Claims up to `limit` due deliveries and starts their attempts; returns how many. */
  private async claimAndStart(limit: number, priorityOnly: boolean): Promise<number> {
    if (this.stopped || limit <= 0) return 0
    const now = this.ctx.clock.now()
    const token = newId()
    const claimed = await this.statements.run(() =>
      this.queue.claim({
        now: new Date(now),
        leaseUntil: new Date(now + this.ctx.config.webhookTimeoutMs + LEASE_MARGIN_MS),
        token,
        limit,
        perEndpoint: IN_FLIGHT_PER_ENDPOINT,
        inFlight: Object.fromEntries(this.inFlightByEndpoint),
        priorityOnly,
      }),
    )
    if (claimed.length === 0) return 0
    // Claimed: whatever happens now, each delivery is tracked (and so released or retried).
    const loading = this.statements.run(() => this.endpoints.load(claimed))
    for (const delivery of claimed) {
      this.track(delivery.endpoint_id, 1)
      let slotHeld = true
      // The cap counts requests to the receiver: the slot is free once the answer is in, while
      // the result is still being recorded, and a capped endpoint's next delivery may go.
      const freeSlot = () => {
        if (!slotHeld) return
        slotHeld = false
        this.track(delivery.endpoint_id, -1)
        this.wake()
      }
      const attempt = this.attempt(delivery, token, freeSlot, loading).finally(() => {
        freeSlot()
        this.attempts.delete(attempt)
      })
      this.attempts.add(attempt)
    }
    return claimed.length
  }

  private track(endpointId: string, delta: number): void {
    this.inFlight += delta
    const count = (this.inFlightByEndpoint.get(endpointId) ?? 0) + delta
    if (count === 0) this.inFlightByEndpoint.delete(endpointId)
    else this.inFlightByEndpoint.set(endpointId, count)
  }

  private async attempt(
    delivery: ClaimedDelivery,
    token: string,
    freeSlot: () => void,
    loading: Promise<void>,
  ): Promise<void> {
    try {
      await loading
      const endpoint = this.endpoints.get(delivery.endpoint_id)
      // Deleted meanwhile, or a secret that does not open (logged): the lease runs out.
      if (!endpoint) return
      const outcome = await this.send(delivery, endpoint)
      freeSlot()
      if (outcome.error === 'shutdown') {
        this.toRelease.add(token)
        return
      }
      const recorded = await this.results.add({ delivery, token, outcome })
      if (!recorded) {
        this.ctx.logger.warn('webhook attempt finished after its claim was lost; not recorded', {
          endpoint_id: delivery.endpoint_id,
          message_id: delivery.message_id,
        })
        return
      }
      if (!outcome.succeeded) await this.disableIfFailingTooLong(delivery, endpoint, outcome.attemptedAt)
    } catch (error) {
      // The lease runs out and the delivery is taken again: at least once, never lost.
      this.ctx.logger.warn('webhook attempt could not be recorded; it will be retried', {
        endpoint_id: delivery.endpoint_id,
        message_id: delivery.message_id,
        error,
      })
    }
  }

  /** One signed POST. Never throws: every way it can end is an outcome. */
  async send(delivery: ClaimedDelivery, endpoint: DeliveryEndpoint): Promise<AttemptOutcome> {
    const attemptedAt = new Date(this.ctx.clock.now())
    const started = performance.now()
    const elapsed = () => Math.round((performance.now() - started) * 10) / 10
    const failed = (
      error: string,
      responseStatus: number | null = null,
      responseBody: string | null = null,
    ) => ({
      attemptedAt,
      responseStatus,
      durationMs: elapsed(),
      responseBody,
      error,
      succeeded: false,
      nextAttemptAt: nextAttemptTime(delivery.attempt_count, attemptedAt, null),
    })
    let target: CheckedTarget
    try {
      // Checked again at delivery (within TARGET_CHECK_TTL_MS): the name may resolve elsewhere
      // since the endpoint was saved.
      target = await this.endpoints.target(endpoint)
    } catch (error) {
      return failed(error instanceof AppError ? `address_refused: ${error.message}` : 'address_refused')
    }

    // The stored `data` as PostgreSQL wrote it out: valid JSON, signed as sent, not parsed and
    // serialised again per delivery.
    const body = `{"type":${JSON.stringify(delivery.event_type)},"timestamp":"${new Date(delivery.message_created_at).toISOString()}","data":${delivery.payload_json}}`
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': delivery.message_id,
      'webhook-timestamp': String(Math.floor(attemptedAt.getTime() / 1000)),
      'webhook-signature': signatures(endpoint, delivery.message_id, attemptedAt, body),
      host: target.host,
    }
    const timeout = AbortSignal.timeout(this.ctx.config.webhookTimeoutMs)
    try {
      const response = await fetch(target.pinnedUrl, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any([timeout, this.shutdown.signal]),
        tls: { serverName: target.serverName },
      })
      const responseBody = await readPrefix(response, RESPONSE_BODY_KEPT_BYTES)
      const status = response.status
      if (status >= 200 && status < 300) {
        return {
          attemptedAt,
          responseStatus: status,
          durationMs: elapsed(),
          responseBody,
          error: null,
          succeeded: true,
          nextAttemptAt: null,
        }
      }
      const retryAfterMs =
        status === 429 || status === 503
          ? parseRetryAfter(response.headers.get('retry-after'), attemptedAt)
          : null
      return {
        ...failed(
          status >= 300 && status < 400 ? 'redirect_not_followed' : 'http_status',
          status,
          responseBody,
        ),
        nextAttemptAt: nextAttemptTime(delivery.attempt_count, attemptedAt, retryAfterMs),
      }
    } catch {
      if (this.shutdown.signal.aborted) return failed('shutdown')
      return failed(timeout.aborted ? 'timeout' : 'connection_failed')
    }
  }

  private async disableIfFailingTooLong(
    delivery: ClaimedDelivery,
    endpoint: DeliveryEndpoint,
    at: Date,
  ): Promise<void> {
    const failingSince = endpoint.failingSince?.getTime() ?? at.getTime()
    if (at.getTime() - failingSince < DISABLE_AFTER_FAILING_MS) return
    const disabled = await this.statements.run(() =>
      this.queue.disableIfFailingSince(
        delivery.endpoint_id,
        new Date(at.getTime() - DISABLE_AFTER_FAILING_MS),
        at,
      ),
    )
    if (!disabled) return
    this.ctx.logger.warn('webhook endpoint disabled: every attempt failed for 5 days', {
      endpoint_id: disabled.id,
      organization_id: disabled.organizationId,
    })
    await this.deps.endpoints.enqueue({
      id: newId(),
      organizationId: disabled.organizationId,
      type: 'endpoint.disabled',
      data: {
        endpoint_id: disabled.id,
        url: disabled.url,
        reason: 'failing_for_5_days',
        failing_since: disabled.failingSince.toISOString(),
      },
      createdAt: at,
      exceptEndpointId: disabled.id,
    })
    // Sent by this worker too when it is not started (tests drive it by hand, without the signal).
    this.wake()
  }

  /**
   * Shutdown: no new claims; attempts in flight may finish within `graceMs`, the rest are aborted
   * and handed back untried (due at once, for this or another replica).
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true
    this.wakeups.close()
    clearTimeout(this.spacedWake)
    this.spacedWake = undefined
    clearTimeout(this.deferredWake)
    this.deferredWake = undefined
    await this.pumping
    const pending = Promise.allSettled([...this.attempts])
    let timer: ReturnType<typeof setTimeout> | undefined
    await Promise.race([pending, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))])
    clearTimeout(timer)
    if (this.attempts.size === 0) return
    this.shutdown.abort()
    await pending
    const now = new Date(this.ctx.clock.now())
    for (const token of this.toRelease) {
      try {
        await this.statements.run(() => this.queue.release(token, now))
      } catch (error) {
        this.ctx.logger.warn('webhook deliveries not released; their lease will run out', { error })
      }
    }
  }
}

/**
 * After the n-th failed attempt (n from 1): the schedule's n-th wait, or the receiver's
 * `Retry-After` (429/503) when it asks for another wait, but never longer than the schedule's next
 * step. Null once the schedule is exhausted: the message has failed.
 */
export function nextAttemptTime(attemptCount: number, at: Date, retryAfterMs: number | null): Date | null {
  const wait = RETRY_SCHEDULE_MS[attemptCount - 1]
  if (wait === undefined) return null
  if (retryAfterMs === null) return new Date(at.getTime() + wait)
  const cap = RETRY_SCHEDULE_MS[attemptCount] ?? wait
  return new Date(at.getTime() + Math.min(Math.max(retryAfterMs, 0), cap))
}

/** `Retry-After` as delay-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: Date): number | null {
  if (!value) return null
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  // An HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT"); Date.parse alone would read "-1" as a year.
  if (!/^[A-Za-z]{3}, /.test(trimmed)) return null
  const date = Date.parse(trimmed)
  return Number.isNaN(date) ? null : Math.max(0, date - now.getTime())
}

/** The first `limit` bytes of a body, as text; the rest is not read. */
async function readPrefix(response: Response, limit: number): Promise<string | null> {
  if (!response.body) return null
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < limit) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.byteLength
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
  const bytes = Buffer.concat(chunks).subarray(0, limit)
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes)
}

/**
 * One `v1,` signature per secret in use: the current one, and the previous one for 24 h after a
 * rotation (its expiry checked at every attempt; the signers themselves are made once per version
 * of the endpoint).
 */
function signatures(endpoint: DeliveryEndpoint, messageId: string, at: Date, body: string): string {
  const signed = endpoint.signer.sign(messageId, at, body)
  if (!endpoint.previousSigner || (endpoint.previousExpiresAt ?? 0) <= at.getTime()) return signed
  return `${signed} ${endpoint.previousSigner.sign(messageId, at, body)}`
}

/** At most `size` tasks at a time; the others wait their turn, in order. */
class Slots {
  private busy = 0
  private readonly waiting: Array<() => void> = []

  constructor(private readonly size: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.busy < this.size) this.busy++
    else await new Promise<void>((resolve) => this.waiting.push(resolve))
    try {
      return await task()
    } finally {
      // The slot goes straight to the next task waiting, or is freed.
      const next = this.waiting.shift()
      if (next) next()
      else this.busy--
    }
  }
}

/**
 * Attempt results are recorded in batches, one statement each and one batch at a time: what ends
 * while a batch is being written waits and goes into the next one. At a high rate toward one
 * endpoint, one round trip per attempt (three writes each) was what bounded the worker, not the
 * receiver; and with one write at a time the batches grow with the rate instead of the number of
 * connections the worker holds.
 */
class ResultBuffer {
  private waiting: Array<{
    result: AttemptResult
    settle: (recorded: boolean) => void
    fail: (error: unknown) => void
  }> = []
  private writing = false
  private lastWriteAt = Number.NEGATIVE_INFINITY

  constructor(
    private readonly write: (batch: AttemptResult[]) => Promise<Set<string>>,
    private readonly spacingMs: number,
  ) {}

  add(result: AttemptResult): Promise<boolean> {
    return new Promise((settle, fail) => {
      this.waiting.push({ result, settle, fail })
      if (this.writing) return
      this.writing = true
      // The results that end in this event-loop turn join the first batch too.
      setImmediate(() => void this.flush())
    })
  }

  private async flush(): Promise<void> {
    while (this.waiting.length > 0) {
      const wait = this.lastWriteAt + this.spacingMs - performance.now()
      if (wait > 0) await Bun.sleep(wait)
      this.lastWriteAt = performance.now()
      const batch = this.waiting
      this.waiting = []
      try {
        const recorded = await this.write(batch.map((entry) => entry.result))
        for (const { result, settle } of batch) {
          settle(recorded.has(`${result.delivery.endpoint_id}:${result.delivery.message_id}`))
        }
      } catch (error) {
        for (const { fail } of batch) fail(error)
      }
    }
    this.writing = false
  }
}
