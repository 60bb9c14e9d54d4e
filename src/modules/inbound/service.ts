import type { AppContext } from '../../context'
import { AppError, errors } from '../../lib/errors'
import { isJsonContentType, type RequestRegistry } from '../../lib/http'
import { type InputGuard, PayloadTooLargeError } from '../../lib/input-guard'
import { ipInRanges } from '../../lib/ip'
import { type BucketState, platformRule, type RateLimitCheck, WINDOW_MS } from '../../lib/rate-limit'
import { digestSecret, isWellFormedSecret } from '../../lib/secrets'
import type { DeliveryLogEntry, DeliveryLogWriter } from '../delivery-logs/log-writer'
import type { CachedSource, SourceCache } from '../sources/source-cache'
import { bodyForLog, readLimitedBody } from './body'
import { CORS_GRANT_HEADERS, checkDomain, corsHeaders, preflightHeaders } from './cors'
import { type GroupCommitWriter, SourceGoneError } from './group-commit'
import { FullWindows, inboundDecision, type KeyVerdict } from './key-limit'
import type { LastRequestRecorder } from './last-request'
import type { InboundOutcomeBody } from './model'
import { type NormalizedLead, normalizeLead } from './normalize'
import { isPhoneField, scrubBody, scrubNullableText, scrubText } from './redact'
import type { RejectionAggregator } from './rejection-aggregator'
import type { InboundRepository } from './repository'
import { spamReasons } from './spam'

/** Requests naming no usable key are limited per client IP, so key guessing is throttled too. */
export const INVALID_KEY_LIMIT_PER_MIN = 60

/** The answer of an accepted POST: the model's schema is the one definition. */
export type InboundOutcome = typeof InboundOutcomeBody.static

export interface InboundCall {
  apiKey: string
  request: Request
  /**
   * The response's headers (Elysia's `set.headers`): CORS and rate limit are written here, and the
   * error handler sends them on errors too. The one way headers leave this service.
   */
  headers: Record<string, unknown>
}

/**
 * A request to a real source that counts against its key's limit: what the limit's verdict needs
 * (its headers go into `headers`, InboundCall.headers).
 */
interface KeyedRequest {
  source: CachedSource
  receivedAt: Date
  /** The platform cap's bucket, taken when the request was admitted. */
  platform: BucketState
  headers: Record<string, unknown>
}

/** One POST to a real source: what every delivery-log entry of the request is made from. */
interface Delivery extends KeyedRequest {
  request: Request
  clientIp: string
  /** performance.now() at arrival, for the entry's duration. */
  started: number
  /**
   * Fields the card-data rule removed from the body (redact.ts), logged once the key's limit has
   * admitted the request: a request over the limit answers its 429 as if its body never acted.
   */
  redacted: string[]
}

/** What admission found: the source, the platform cap's bucket, and the 429 when refused already. */
interface Admission {
  source: CachedSource
  platform: BucketState
  refusal: AppError | null
}

/** The body's share of a delivery-log entry: its size and its cleaned text, cut for the log. */
type LoggedBody = Pick<DeliveryLogEntry, 'bodyBytes' | 'body' | 'bodyTruncated'>

type RawBody = Awaited<ReturnType<typeof readLimitedBody>>

/** The body checked up to the field types: its fields (cleaned, redact.ts), or why it is refused. */
type ParsedBody =
  | { refusal: null; fields: Record<string, unknown>; logged: LoggedBody }
  | { refusal: AppError; logged: LoggedBody }

const UNKNOWN_KEY_MESSAGE = 'webhook not found: the key is unknown or the source is disabled'
const MISSING_CONTACT_MESSAGE = 'a lead needs a valid "email" or a "phone_raw" that is a valid phone number'

/**
 * The inbound pipeline, in the order of DESIGN §7 (spec §4): key format → source (cache) → rate
 * limit → IP and domain allow lists → size → JSON object → mapping → field types → spam → contact
 * rule → dedup + store. One database statement on the accepted path, and no other round trip: the
 * per-key limit is decided by PostgreSQL in the statement that ends the request (ingest_leads, or
 * log_deliveries for a refusal), its 429 winning over whatever else the request would have got, so
 * the order of the checks holds (docs/architecture.md "One round trip"). The platform cap is
 * decided by the replica (ctx.platformCap), and a key known to be over its limit is refused
 * without a statement (FullWindows).
 */
export class InboundService {
  /** Accepted leads, written in groups (group-commit.ts). */
  readonly writer: GroupCommitWriter
  readonly deliveryLogs: DeliveryLogWriter
  readonly rejections: RejectionAggregator
  readonly lastRequests: LastRequestRecorder
  private readonly registry: RequestRegistry
  private readonly guard: InputGuard
  private readonly sources: SourceCache
  private readonly checkLimit: RateLimitCheck
  private readonly repository: InboundRepository
  /** Keys the database reported as full, refused here until their oldest request leaves the window. */
  private readonly fullWindows = new FullWindows()

  /**
   * Every collaborator is built by buildServices (src/services.ts) and passed in: the writers are
   * the replica's own (one group-commit queue, one set of write-behind buffers), the registry is
   * the one the plugins fill and the error handler reads, the limit check is the one the
   * management plugin uses.
   */
  constructor(
    private readonly ctx: AppContext,
    deps: {
      guard: InputGuard
      registry: RequestRegistry
      sources: SourceCache
      checkLimit: RateLimitCheck
      repository: InboundRepository
      writer: GroupCommitWriter
      deliveryLogs: DeliveryLogWriter
      rejections: RejectionAggregator
      lastRequests: LastRequestRecorder
    },
  ) {
    this.guard = deps.guard
    this.registry = deps.registry
    this.sources = deps.sources
    this.checkLimit = deps.checkLimit
    this.repository = deps.repository
    this.writer = deps.writer
    this.deliveryLogs = deps.deliveryLogs
    this.rejections = deps.rejections
    this.lastRequests = deps.lastRequests
  }

  /** POST: the pipeline, step by step; every refusal after the source is found is logged. */
  async receive(call: InboundCall): Promise<InboundOutcome> {
    const started = performance.now()
    const receivedAt = new Date(this.ctx.clock.now())
    const clientIp = this.registry.get(call.request).clientIp
    const { source, platform, refusal: limited } = await this.admit(call, clientIp, receivedAt)
    const delivery: Delivery = {
      request: call.request,
      source,
      clientIp,
      receivedAt,
      started,
      platform,
      headers: call.headers,
      redacted: [],
    }
    this.lastRequests.note(source.id, receivedAt.getTime())
    if (limited) return this.countFlood(delivery, limited)

    const refused = allowListRefusal(source, clientIp, call.request)
    if (refused) return this.refuse(delivery, refused)

    let raw: RawBody
    try {
      raw = await readLimitedBody(call.request)
    } catch (error) {
      return this.refuseUnreadable(delivery, error)
    }

    const body = this.parseBody(delivery, raw)
    if (body.refusal) return this.refuse(delivery, body.refusal, body.logged)

    const { lead, details } = normalizeLead(body.fields, source)
    if (details.length > 0) {
      return this.refuse(
        delivery,
        errors.validation('some fields have the wrong type or size', details),
        body.logged,
      )
    }

    const spam = source.spamFilter ? spamReasons(lead) : null
    if (spam && spam.length > 0) return this.acceptAsSpam(delivery, body.logged, spam)
    if (!lead.emailNormalized && !lead.phoneE164) return this.answerMissingContact(delivery, body.logged)

    return this.store(delivery, lead, body.logged)
  }

  /**
   * CORS preflight. Counted against the key's limit like any other request. An origin outside the
   * domain allow list gets a 403 without CORS headers (the browser then never sends the POST), and
   * the refusal is logged so the source's owner can see it. An admitted preflight's headers are
   * written like every other answer's (InboundCall.headers).
   */
  async preflight(call: InboundCall): Promise<void> {
    const clientIp = this.registry.get(call.request).clientIp
    const receivedAt = new Date(this.ctx.clock.now())
    const { source, platform, refusal } = await this.admit(call, clientIp, receivedAt)
    if (refusal) throw refusal
    const keyed: KeyedRequest = { source, receivedAt, platform, headers: call.headers }
    const domain = checkDomain(source, call.request)
    if (!domain.allowed) {
      const refused = new AppError(
        'domain_not_allowed',
        `requests from ${domain.host ?? 'an unknown origin'} are not allowed`,
      )
      const verdict = await this.deliveryLogs.writeCounted(
        logEntry(source, call.request, clientIp, receivedAt, {
          httpStatus: refused.status,
          reason: refused.code,
        }),
      )
      // Over the limit, the 429 wins (as when the limit was checked first), with the CORS headers.
      const limited = this.judge(keyed, verdict)
      if (limited) throw limited
      for (const name of CORS_GRANT_HEADERS) delete call.headers[name]
      throw refused
    }
    const limited = this.judge(keyed, await this.repository.countRequest({ sourceId: source.id, receivedAt }))
    if (limited) throw limited
    Object.assign(call.headers, preflightHeaders(source, call.request.headers.get('origin')))
  }

  /** The source behind a key for the informational GET: same 404s and limit as a POST. */
  async describeSource(call: InboundCall): Promise<CachedSource> {
    const receivedAt = new Date(this.ctx.clock.now())
    const { source, platform, refusal } = await this.admit(
      call,
      this.registry.get(call.request).clientIp,
      receivedAt,
    )
    if (refusal) throw refusal
    const verdict = await this.repository.countRequest({ sourceId: source.id, receivedAt })
    const limited = this.judge({ source, receivedAt, platform, headers: call.headers }, verdict)
    if (limited) throw limited
    return source
  }

  /**
   * The first steps of every method on the webhook URL: the source behind the key (404), its CORS
   * headers (on every answer from here on), then what the replica knows of the limits without a
   * round trip: a key the database reported full is refused until its oldest request leaves the
   * window (FullWindows, never wrongly), else the platform cap is taken. A refusal is returned for
   * the caller to throw (a POST counts it in the delivery logs first); otherwise the key's verdict
   * comes from the database in the statement that ends the request, and with it the headers (judge).
   */
  private async admit(call: InboundCall, clientIp: string, receivedAt: Date): Promise<Admission> {
    const source = await this.resolveSource(call, clientIp)
    Object.assign(call.headers, corsHeaders(source, call.request.headers.get('origin')))
    const now = receivedAt.getTime()
    const full = this.fullWindows.check(source.id, now)
    // A request the key refuses is not counted against the cap (as when both were one check).
    const platform = full ? this.ctx.platformCap.peek(now) : this.ctx.platformCap.take(now)
    const decision = inboundDecision(platform, full)
    // Every answer carries the headers (DESIGN §5), a 503 of the database included: the cap's until
    // the key's verdict replaces them.
    Object.assign(call.headers, decision.headers)
    return { source, platform, refusal: decision.refusal }
  }

  /**
   * The key's verdict from the database on a request that counts against it: remembered for the
   * pre-check, its headers written (with the platform cap's, the most constraining as before); the
   * 429 when the request was over the limit. No verdict (the source was deleted meanwhile): the cap's
   * headers alone.
   */
  private judge(request: KeyedRequest, verdict: KeyVerdict | null): AppError | null {
    if (verdict) this.fullWindows.note(request.source.id, request.receivedAt.getTime(), verdict)
    const decision = inboundDecision(request.platform, verdict)
    Object.assign(request.headers, decision.headers)
    return decision.refusal
  }

  /**
   * Key format, then the source by the key's digest (a per-replica cache). A malformed, unknown or
   * disabled key is refused (refuseKey).
   */
  private async resolveSource(call: InboundCall, clientIp: string): Promise<CachedSource> {
    const keyDigest = isWellFormedSecret('source_key', call.apiKey) ? digestSecret(call.apiKey) : null
    const source = keyDigest === null ? null : await this.sources.findByKeyDigest(keyDigest)
    if (source?.enabled) return source
    return this.refuseKey(call, clientIp, source)
  }

  /**
   * 404 for a malformed, unknown or disabled key, with one body for all so the reason never leaks.
   * These are limited per client IP (they have no source to be limited by); a disabled source is
   * still a real one, so its owner sees the refused traffic in its logs.
   */
  private async refuseKey(call: InboundCall, clientIp: string, source: CachedSource | null): Promise<never> {
    Object.assign(call.headers, corsHeaders(source, call.request.headers.get('origin')))
    const limit = await this.checkLimit([
      platformRule(this.ctx),
      { bucket: 'inbound_invalid', key: clientIp, limit: INVALID_KEY_LIMIT_PER_MIN, windowMs: WINDOW_MS },
    ])
    Object.assign(call.headers, limit.headers)
    if (limit.refusal) throw limit.refusal
    if (source) {
      await this.deliveryLogs.write([
        logEntry(source, call.request, clientIp, new Date(this.ctx.clock.now()), {
          httpStatus: 404,
          reason: 'source_disabled',
        }),
      ])
    }
    throw new AppError('webhook_not_found', UNKNOWN_KEY_MESSAGE)
  }

  /** The key's 429: a flood is counted in memory and logged as one row a second (rejection-aggregator.ts). */
  private countFlood(delivery: Delivery, refusal: AppError): never {
    this.rejections.add(entryOf(delivery, { httpStatus: refusal.status, reason: refusal.code }))
    throw refusal
  }

  /**
   * A refusal after the source is known: logged (with what is known of the body) and counted
   * against the key in one statement, then thrown; over the limit it is the key's 429 instead.
   */
  private async refuse(
    delivery: Delivery,
    error: AppError,
    extra: Partial<DeliveryLogEntry> = {},
  ): Promise<never> {
    await this.logCounted(delivery, { httpStatus: error.status, reason: error.code, ...extra })
    throw error
  }

  /**
   * The delivery-log entry of a POST that stores no lead, written only if the key's limit admits
   * the request (log_deliveries decides both in one statement); over the limit, the 429 is counted
   * and thrown instead (countFlood).
   */
  private async logCounted(delivery: Delivery, overrides: Partial<DeliveryLogEntry>): Promise<void> {
    const verdict = await this.deliveryLogs.writeCounted(entryOf(delivery, overrides))
    const limited = this.judge(delivery, verdict)
    if (limited) this.countFlood(delivery, limited)
    this.logRedactions(delivery)
  }

  /** The card-data removal of an admitted request (its fields' names, never their values). */
  private logRedactions(delivery: Delivery): void {
    if (delivery.redacted.length === 0) return
    this.ctx.logger.info('card data removed from an inbound body', {
      request_id: this.registry.get(delivery.request).requestId,
      source_id: delivery.source.id,
      fields: delivery.redacted,
    })
  }

  /** A body over the size limit (413, with the bytes received) or not UTF-8 (400). */
  private refuseUnreadable(delivery: Delivery, error: unknown): Promise<never> {
    if (error instanceof PayloadTooLargeError) {
      return this.refuse(delivery, error, { bodyBytes: error.receivedBytes })
    }
    if (error instanceof AppError) return this.refuse(delivery, error)
    throw error
  }

  /**
   * A JSON object sent as JSON, within the nesting depth, with nothing PostgreSQL cannot store;
   * else the refusal. Parsed once, then cleaned before anything is stored: the lead and the delivery
   * log both hold the cleaned body (credentials masked, card data removed; redact.ts).
   */
  private parseBody(delivery: Delivery, raw: RawBody): ParsedBody {
    const { text, bytes } = raw
    if (!isJsonContentType(delivery.request.headers.get('content-type'))) {
      return refusedBody(
        new AppError(
          'invalid_content_type',
          'the body must be JSON sent with "Content-Type: application/json"',
        ),
        raw,
      )
    }
    let parsed: unknown
    try {
      // The shared input guard (docs/security.md): nesting depth before JSON.parse recurses.
      this.guard.checkJsonDepth(text)
      parsed = JSON.parse(text)
    } catch (error) {
      if (error instanceof AppError) return refusedBody(error, raw)
      const details = [{ path: '/', message: (error as Error).message }]
      return refusedBody(new AppError('invalid_json', 'the body is not valid JSON', { details }), raw)
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      const got = Array.isArray(parsed) ? 'array' : typeof parsed
      const details = [{ path: '/', message: `expected an object, got ${got}` }]
      return refusedBody(new AppError('invalid_body', 'the body must be a JSON object', { details }), raw)
    }
    const { source } = delivery
    const scrubbed = scrubBody(parsed as Record<string, unknown>, text, (name) =>
      isPhoneField(name, source.fieldMapping),
    )
    delivery.redacted = scrubbed.redacted
    const logged = loggedBody(scrubbed.logText, bytes)
    // JSON text can carry NUL or a lone surrogate only as a \u escape (the body was decoded from
    // UTF-8, and a raw NUL is invalid JSON): without one, the walk has nothing to find.
    const unstorable = text.includes('\\u') ? this.guard.unstorable(scrubbed.body) : []
    if (unstorable.length > 0) {
      return {
        refusal: errors.validation('the request contains values that cannot be stored', unstorable),
        logged,
      }
    }
    return { refusal: null, fields: scrubbed.body, logged }
  }

  /** Spam (filter on): accepted with `success: true`, no lead, the reasons logged. */
  private async acceptAsSpam(
    delivery: Delivery,
    logged: LoggedBody,
    reasons: string[],
  ): Promise<InboundOutcome> {
    await this.logCounted(delivery, {
      ...logged,
      outcome: 'spam',
      reason: reasons[0] ?? null,
      spamReasons: reasons,
    })
    return { status: 'spam', success: true }
  }

  /** Neither a valid e-mail nor a phone: a 200 that says so, logged, nothing stored. */
  private async answerMissingContact(delivery: Delivery, logged: LoggedBody): Promise<InboundOutcome> {
    await this.logCounted(delivery, { ...logged, outcome: 'error', reason: 'missing_contact' })
    return { status: 'error', success: false, error: 'missing_contact', message: MISSING_CONTACT_MESSAGE }
  }

  /**
   * The key's limit, dedup + store, with the lead's delivery-log entry, answered after the commit;
   * over the limit, nothing is written and the 429 is counted like the others.
   */
  private async store(delivery: Delivery, lead: NormalizedLead, logged: LoggedBody): Promise<InboundOutcome> {
    try {
      const stored = await this.writer.ingest(delivery.source, lead, entryOf(delivery, logged))
      const limited = this.judge(delivery, stored.verdict)
      if (limited) return this.countFlood(delivery, limited)
      if (stored.outcome === 'rate_limited')
        throw new Error('ingest_leads refused a lead its verdict admitted')
      this.logRedactions(delivery)
      return { status: stored.outcome, success: true, lead_id: stored.leadId }
    } catch (error) {
      // The source was deleted after this request found it: the key no longer names a webhook.
      if (error instanceof SourceGoneError) {
        this.sources.evict(delivery.source.id)
        throw new AppError('webhook_not_found', UNKNOWN_KEY_MESSAGE)
      }
      throw error
    }
  }
}

/** The IP allow list, then the domain allow list (cors.ts): the POST's 403s. */
export function allowListRefusal(source: CachedSource, clientIp: string, request: Request): AppError | null {
  if (source.ipRanges.length > 0 && !ipInRanges(clientIp, source.ipRanges)) {
    return new AppError('ip_not_allowed', `requests from ${clientIp} are not in this source's IP allow list`)
  }
  const domain = checkDomain(source, request)
  if (domain.allowed) return null
  return new AppError(
    'domain_not_allowed',
    domain.host
      ? `requests from ${domain.host} are not in this source's domain allow list`
      : 'this source has a domain allow list: send an Origin or Referer header from an allowed domain',
  )
}

/** The body as its delivery-log entry keeps it: cleaned text cut at LOGGED_BODY_BYTES. */
function loggedBody(cleanedText: string, bytes: number): LoggedBody {
  const logged = bodyForLog(cleanedText)
  return { bodyBytes: bytes, body: logged.body, bodyTruncated: logged.truncated }
}

/** A body refused before it was parsed into an object: logged as cleaned text. */
function refusedBody(refusal: AppError, raw: RawBody): ParsedBody {
  return { refusal, logged: loggedBody(scrubText(raw.text), raw.bytes) }
}

/** A delivery-log entry for a request to a source; by default a body-less rejection. */
function logEntry(
  source: CachedSource,
  request: Request,
  clientIp: string,
  receivedAt: Date,
  overrides: Partial<DeliveryLogEntry>,
): DeliveryLogEntry {
  return {
    sourceId: source.id,
    organizationId: source.organizationId,
    receivedAt,
    method: request.method,
    httpStatus: 200,
    outcome: 'rejected',
    reason: null,
    clientIp,
    // Stored cleaned: a Referer can carry a key or a card number in its query string.
    origin: scrubNullableText(request.headers.get('origin') ?? request.headers.get('referer')),
    userAgent: scrubNullableText(request.headers.get('user-agent')),
    bodyBytes: 0,
    body: null,
    bodyTruncated: false,
    spamReasons: [],
    durationMs: 0,
    ...overrides,
  }
}

/** The entry of a POST, timed up to now. */
function entryOf(delivery: Delivery, overrides: Partial<DeliveryLogEntry>): DeliveryLogEntry {
  return logEntry(delivery.source, delivery.request, delivery.clientIp, delivery.receivedAt, {
    durationMs: Math.round((performance.now() - delivery.started) * 100) / 100,
    ...overrides,
  })
}
