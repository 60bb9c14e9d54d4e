import { Webhook } from 'standardwebhooks'
import type { AppContext } from '../../context'
import { AppError } from '../../lib/errors'
import { newId } from '../../lib/ids'
import { parseOutboundUrl, resolveOutboundTarget } from '../../lib/outbound-url'
import { type AttemptOutcome, type ClaimedDelivery, DeliveryQueueRepository } from './repository'
import type { WebhookEndpointsService } from './service'
import type { DeliverySignal } from './signal'

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
 * The delivery worker of one replica. Claims due deliveries (webhook_deliveries as a SKIP LOCKED
 * queue, so replicas never take the same one), sends each as a signed Standard Webhooks request,
 * records the attempt and schedules the next. Woken at once by this replica's writes (in process,
 * signal.ts); polls every second for the rest (retries that came due, other replicas' events when
 * their replica is gone, leases that ran out).
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
  private pumping: Promise<void> | null = null
  private pumpAgain = false
  private stopped = false
  private started = false

  constructor(
    private readonly ctx: AppContext,
    private readonly deps: { signal: DeliverySignal; endpoints: WebhookEndpointsService },
  ) {
    this.queue = new DeliveryQueueRepository(ctx)
    this.results = new ResultBuffer(this.queue)
  }

  /**
   * In-process wake-ups; the poll is a periodic job (webhookJobs). Started and stopped with the
   * rest of the background work (src/jobs.ts).
   */
  start(): void {
    if (this.started) return
    this.started = true
    this.deps.signal.subscribe(() => this.wake())
    this.wake()
  }

  /** Claims and starts what is due now; never overlaps itself (a wake-up during a claim re-runs it). */
  wake(): void {
    if (this.stopped) return
    if (this.pumping) {
      this.pumpAgain = true
      return
    }
    this.pumping = this.pump()
      .catch((error) => this.ctx.logger.warn('webhook claim failed; retrying on the next poll', { error }))
      .finally(() => {
        this.pumping = null
        if (this.pumpAgain) {
          this.pumpAgain = false
          this.wake()
        }
      })
  }

  /** For the periodic poll and for tests: claim what is due, and wait until those attempts end. */
  async deliverDue(): Promise<void> {
    this.wake()
    while (this.pumping || this.attempts.size > 0) {
      await this.pumping
      await Promise.allSettled([...this.attempts])
    }
  }

  private async pump(): Promise<void> {
    while (!this.stopped && this.inFlight < IN_FLIGHT_TOTAL) {
      const now = this.ctx.clock.now()
      const token = newId()
      const claimed = await this.queue.claim({
        now: new Date(now),
        leaseUntil: new Date(now + this.ctx.config.webhookTimeoutMs + LEASE_MARGIN_MS),
        token,
        limit: IN_FLIGHT_TOTAL - this.inFlight,
        perEndpoint: IN_FLIGHT_PER_ENDPOINT,
        inFlight: Object.fromEntries(this.inFlightByEndpoint),
      })
      if (claimed.length === 0) return
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
        const attempt = this.attempt(delivery, token, freeSlot).finally(() => {
          freeSlot()
          this.attempts.delete(attempt)
        })
        this.attempts.add(attempt)
      }
    }
  }

  private track(endpointId: string, delta: number): void {
    this.inFlight += delta
    const count = (this.inFlightByEndpoint.get(endpointId) ?? 0) + delta
    if (count === 0) this.inFlightByEndpoint.delete(endpointId)
    else this.inFlightByEndpoint.set(endpointId, count)
  }

  private async attempt(delivery: ClaimedDelivery, token: string, freeSlot: () => void): Promise<void> {
    try {
      const outcome = await this.send(delivery)
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
      if (!outcome.succeeded) await this.disableIfFailingTooLong(delivery, outcome.attemptedAt)
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
  async send(delivery: ClaimedDelivery): Promise<AttemptOutcome> {
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
    const policy = { allowPrivateNetworks: this.ctx.config.outboundAllowPrivateNetworks }
    let target: Awaited<ReturnType<typeof resolveOutboundTarget>>
    try {
      // Checked again at every attempt: the name may resolve elsewhere since the endpoint was saved.
      target = await resolveOutboundTarget(parseOutboundUrl(delivery.url, policy), policy)
    } catch (error) {
      return failed(error instanceof AppError ? `address_refused: ${error.message}` : 'address_refused')
    }

    const body = JSON.stringify({
      type: delivery.event_type,
      timestamp: new Date(delivery.message_created_at).toISOString(),
      data: delivery.payload,
    })
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': delivery.message_id,
      'webhook-timestamp': String(Math.floor(attemptedAt.getTime() / 1000)),
      'webhook-signature': this.signatures(delivery, attemptedAt, body),
      host: target.url.host,
    }
    const timeout = AbortSignal.timeout(this.ctx.config.webhookTimeoutMs)
    try {
      const response = await fetch(pinnedUrl(target.url, target.address), {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any([timeout, this.shutdown.signal]),
        tls: { serverName: target.url.hostname.replace(/^\[(.*)\]$/, '$1') },
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

  /** One `v1,` signature per secret in use: the current one, and the previous one for 24 h after a rotation. */
  private signatures(delivery: ClaimedDelivery, at: Date, body: string): string {
    const secrets = [this.ctx.secretBox.open(delivery.secret_ciphertext)]
    const previousExpiresAt = delivery.previous_secret_expires_at
    if (
      delivery.previous_secret_ciphertext &&
      previousExpiresAt &&
      new Date(previousExpiresAt).getTime() > at.getTime()
    ) {
      secrets.push(this.ctx.secretBox.open(delivery.previous_secret_ciphertext))
    }
    return secrets.map((secret) => new Webhook(secret).sign(delivery.message_id, at, body)).join(' ')
  }

  private async disableIfFailingTooLong(delivery: ClaimedDelivery, at: Date): Promise<void> {
    const failingSince = delivery.failing_since ? new Date(delivery.failing_since).getTime() : at.getTime()
    if (at.getTime() - failingSince < DISABLE_AFTER_FAILING_MS) return
    const disabled = await this.queue.disableIfFailingSince(
      delivery.endpoint_id,
      new Date(at.getTime() - DISABLE_AFTER_FAILING_MS),
      at,
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
        await this.queue.release(token, now)
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

/** The URL with its host replaced by the checked address (the Host header and SNI keep the name). */
function pinnedUrl(url: URL, address: string): string {
  const pinned = new URL(url.toString())
  pinned.hostname = address.includes(':') ? `[${address}]` : address
  return pinned.toString()
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

type AttemptResult = Parameters<DeliveryQueueRepository['record']>[0][number]

/**
 * Attempt results that end in the same event-loop turn are recorded by one statement: at a high
 * rate toward one endpoint, one round trip per attempt (three writes each) was what bounded the
 * worker, not the receiver.
 */
class ResultBuffer {
  private waiting: Array<{
    result: AttemptResult
    settle: (recorded: boolean) => void
    fail: (error: unknown) => void
  }> = []
  private scheduled = false

  constructor(private readonly queue: DeliveryQueueRepository) {}

  add(result: AttemptResult): Promise<boolean> {
    return new Promise((settle, fail) => {
      this.waiting.push({ result, settle, fail })
      if (this.scheduled) return
      this.scheduled = true
      setImmediate(() => void this.flush())
    })
  }

  private async flush(): Promise<void> {
    this.scheduled = false
    const batch = this.waiting
    this.waiting = []
    try {
      const recorded = await this.queue.record(batch.map((entry) => entry.result))
      for (const { result, settle } of batch) {
        settle(recorded.has(`${result.delivery.endpoint_id}:${result.delivery.message_id}`))
      }
    } catch (error) {
      for (const { fail } of batch) fail(error)
    }
  }
}
