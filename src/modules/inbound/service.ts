import type { AppContext } from '../../context'
import { AppError, errors } from '../../lib/errors'
import type { RequestRegistry } from '../../lib/http'
import { type InputGuard, PayloadTooLargeError } from '../../lib/input-guard'
import { ipInRanges } from '../../lib/ip'
import type { RateLimitRule } from '../../lib/rate-limit'
import { digestSecret, isWellFormedSecret } from '../../lib/secrets'
import { enforceRateLimit, platformRule, WINDOW_MS } from '../../plugins/rate-limit'
import type { CachedSource, SourceCache } from '../sources/source-cache'
import type { DeliverySignal } from '../webhook-endpoints/signal'
import { bodyForLog, isJsonContentType, readLimitedBody } from './body'
import { LastRequestRecorder } from './last-request'
import { normalizeLead } from './normalize'
import { isPhoneField, scrubBody, scrubNullableText, scrubText } from './redact'
import { RejectionAggregator } from './rejection-aggregator'
import { type DeliveryLogEntry, InboundRepository, type IngestResult, SourceGoneError } from './repository'
import { spamReasons } from './spam'

/** Spec §8: 60 requests per minute per source key, `Retry-After: 60` when exceeded. */
export const INBOUND_LIMIT_PER_MIN = 60
/** Requests naming no usable key are limited per client IP, so key guessing is throttled too. */
export const INVALID_KEY_LIMIT_PER_MIN = 60

export type InboundOutcome =
  | { status: 'created' | 'updated'; success: true; lead_id: string }
  | { status: 'spam'; success: true }
  | { status: 'error'; success: false; error: 'missing_contact'; message: string }

export interface InboundCall {
  apiKey: string
  request: Request
  /** Response headers to fill (CORS, rate limit); sent on errors too. */
  headers: Record<string, unknown>
  /** SHA-256 of the key, computed once by resolveSource for the cache and the limiter. */
  keyDigest?: string
}

const UNKNOWN_KEY_MESSAGE = 'webhook not found: the key is unknown or the source is disabled'

/**
 * The inbound pipeline, in the order of DESIGN §7: key format → source (cache) → rate limit →
 * IP and domain allow lists → size → JSON object → mapping → field types → spam → contact rule →
 * dedup + store. One limiter round trip and one database statement on the accepted path.
 */
export class InboundService {
  readonly repository: InboundRepository
  readonly rejections: RejectionAggregator
  readonly lastRequests: LastRequestRecorder
  private readonly registry: RequestRegistry
  private readonly guard: InputGuard
  private readonly sources: SourceCache

  constructor(
    private readonly ctx: AppContext,
    deps: { guard: InputGuard; registry: RequestRegistry; sources: SourceCache; signal: DeliverySignal },
  ) {
    this.guard = deps.guard
    this.registry = deps.registry
    this.sources = deps.sources
    this.repository = new InboundRepository(ctx, deps.signal)
    this.rejections = new RejectionAggregator(ctx, this.repository)
    this.lastRequests = new LastRequestRecorder(ctx)
  }

  async receive(call: InboundCall): Promise<InboundOutcome> {
    const started = performance.now()
    const receivedAt = new Date(this.ctx.clock.now())
    const { request, headers } = call
    const clientIp = this.registry.get(request).clientIp
    const source = await this.resolveSource(call, clientIp)
    this.lastRequests.note(source.id, receivedAt.getTime())

    const facts = (overrides: Partial<DeliveryLogEntry> = {}): DeliveryLogEntry =>
      logEntry(source, request, clientIp, receivedAt, {
        durationMs: Math.round((performance.now() - started) * 100) / 100,
        ...overrides,
      })
    const reject = async (error: AppError, overrides: Partial<DeliveryLogEntry> = {}): Promise<never> => {
      await this.repository.insertLog(facts({ httpStatus: error.status, reason: error.code, ...overrides }))
      throw error
    }

    try {
      await enforceRateLimit(this.ctx, this.registry, request, headers, [
        platformRule(this.ctx),
        keyRule(call.keyDigest!),
      ])
    } catch (error) {
      if (error instanceof AppError && error.status === 429) {
        this.rejections.add(facts({ httpStatus: 429, reason: 'rate_limited' }))
      }
      throw error
    }

    const refusal = allowListRefusal(source, clientIp, request)
    if (refusal) await reject(refusal)

    let text: string
    let bytes: number
    try {
      ;({ text, bytes } = await readLimitedBody(request))
    } catch (error) {
      if (error instanceof PayloadTooLargeError) return reject(error, { bodyBytes: error.receivedBytes })
      if (error instanceof AppError) return reject(error)
      throw error
    }
    // Parsed once, then cleaned before anything is stored: the lead and the delivery log both hold
    // the cleaned body (credentials masked, card data removed; redact.ts).
    const jsonType = isJsonContentType(request.headers.get('content-type'))
    let parsed: unknown
    let parseError: Error | undefined
    let depthError: AppError | undefined
    if (jsonType) {
      try {
        // The shared input guard (docs/security.md): nesting depth before JSON.parse recurses.
        this.guard.checkJsonDepth(text)
        parsed = JSON.parse(text)
      } catch (error) {
        if (error instanceof AppError) depthError = error
        else parseError = error as Error
      }
    }
    let loggedText: string
    if (jsonType && !parseError && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      const scrubbed = scrubBody(parsed as Record<string, unknown>, text, (name) =>
        isPhoneField(name, source.fieldMapping),
      )
      parsed = scrubbed.body
      loggedText = scrubbed.logText
      if (scrubbed.redacted.length > 0) {
        this.ctx.logger.info('card data removed from an inbound body', {
          request_id: this.registry.get(request).requestId,
          source_id: source.id,
          fields: scrubbed.redacted,
        })
      }
    } else loggedText = scrubText(text)
    const logged = bodyForLog(loggedText)
    const withBody = { bodyBytes: bytes, body: logged.body, bodyTruncated: logged.truncated }

    if (!jsonType) {
      await reject(
        new AppError(
          'invalid_content_type',
          'the body must be JSON sent with "Content-Type: application/json"',
        ),
        withBody,
      )
    }
    if (depthError) await reject(depthError, withBody)
    if (parseError) {
      await reject(
        new AppError('invalid_json', 'the body is not valid JSON', {
          details: [{ path: '/', message: parseError.message }],
        }),
        withBody,
      )
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      await reject(
        new AppError('invalid_body', 'the body must be a JSON object', {
          details: [
            {
              path: '/',
              message: `expected an object, got ${Array.isArray(parsed) ? 'array' : typeof parsed}`,
            },
          ],
        }),
        withBody,
      )
    }

    // JSON text can carry NUL or a lone surrogate only as a \u escape (the body was decoded from
    // UTF-8, and a raw NUL is invalid JSON): without one, the walk has nothing to find.
    const unstorable = text.includes('\\u') ? this.guard.unstorable(parsed) : []
    if (unstorable.length > 0) {
      await reject(
        errors.validation('the request contains values that cannot be stored', unstorable),
        withBody,
      )
    }

    const { lead, details } = normalizeLead(parsed as Record<string, unknown>, source)
    if (details.length > 0)
      await reject(errors.validation('some fields have the wrong type or size', details), withBody)

    if (source.spamFilter) {
      const reasons = spamReasons(lead)
      if (reasons.length > 0) {
        await this.repository.insertLog(
          facts({ ...withBody, outcome: 'spam', reason: reasons[0], spamReasons: reasons }),
        )
        return { status: 'spam', success: true }
      }
    }

    if (!lead.emailNormalized && !lead.phoneE164) {
      await this.repository.insertLog(facts({ ...withBody, outcome: 'error', reason: 'missing_contact' }))
      return {
        status: 'error',
        success: false,
        error: 'missing_contact',
        message: 'a lead needs a valid "email" or a "phone_raw" that is a valid phone number',
      }
    }

    let stored: IngestResult
    try {
      stored = await this.repository.ingest(source, lead, facts(withBody))
    } catch (error) {
      // The source was deleted after this request found it: the key no longer names a webhook.
      if (error instanceof SourceGoneError) {
        this.sources.evict(source.id)
        throw new AppError('webhook_not_found', UNKNOWN_KEY_MESSAGE)
      }
      throw error
    }
    return { status: stored.outcome, success: true, lead_id: stored.leadId }
  }

  /**
   * CORS preflight. Counted against the key's limit like any other request. An origin outside the
   * domain allow list gets a 403 without CORS headers (the browser then never sends the POST), and
   * the refusal is logged so the source's owner can see it.
   */
  async preflight(call: InboundCall): Promise<Record<string, string>> {
    const clientIp = this.registry.get(call.request).clientIp
    const source = await this.resolveSource(call, clientIp)
    await enforceRateLimit(this.ctx, this.registry, call.request, call.headers, [
      platformRule(this.ctx),
      keyRule(call.keyDigest!),
    ])
    const origin = call.request.headers.get('origin')
    const host = requestHost(call.request)
    if (source.domainAllowlist.length > 0 && (!host || !hostAllowed(host, source.domainAllowlist))) {
      delete call.headers['access-control-allow-origin']
      delete call.headers['access-control-expose-headers']
      const refusal = new AppError(
        'domain_not_allowed',
        `requests from ${host ?? 'an unknown origin'} are not allowed`,
      )
      await this.repository.insertLog(
        logEntry(source, call.request, clientIp, new Date(this.ctx.clock.now()), {
          httpStatus: 403,
          reason: refusal.code,
        }),
      )
      throw refusal
    }
    return {
      ...corsHeaders(source, origin ?? '*'),
      'access-control-allow-methods': 'POST, GET, OPTIONS',
      'access-control-allow-headers': 'Content-Type, X-Request-Id',
      'access-control-max-age': '600',
    }
  }

  /** The source behind a key for the informational GET: same 404s and limit as a POST. */
  async describeSource(call: InboundCall): Promise<CachedSource> {
    const source = await this.resolveSource(call, this.registry.get(call.request).clientIp)
    await enforceRateLimit(this.ctx, this.registry, call.request, call.headers, [
      platformRule(this.ctx),
      keyRule(call.keyDigest!),
    ])
    return source
  }

  /**
   * 404 for a malformed, unknown or disabled key, with one body for all so the reason never leaks.
   * These are limited per client IP (they have no source to be limited by).
   */
  async resolveSource(call: InboundCall, clientIp: string): Promise<CachedSource> {
    const wellFormed = isWellFormedSecret('source_key', call.apiKey)
    if (wellFormed) call.keyDigest = digestSecret(call.apiKey)
    const source = call.keyDigest ? await this.sources.findByKeyDigest(call.keyDigest) : null
    Object.assign(call.headers, corsHeaders(source, call.request.headers.get('origin')))
    if (source?.enabled) return source
    await enforceRateLimit(this.ctx, this.registry, call.request, call.headers, [
      platformRule(this.ctx),
      { bucket: 'inbound_invalid', key: clientIp, limit: INVALID_KEY_LIMIT_PER_MIN, windowMs: WINDOW_MS },
    ])
    if (source) {
      // A disabled source is still a real one: its owner sees the refused traffic in the logs.
      await this.repository.insertLog(
        logEntry(source, call.request, clientIp, new Date(this.ctx.clock.now()), {
          httpStatus: 404,
          reason: 'source_disabled',
        }),
      )
    }
    throw new AppError('webhook_not_found', UNKNOWN_KEY_MESSAGE)
  }
}

/** The per-key bucket, keyed by the key's digest so the key itself never reaches Redis. */
export function keyRule(keyDigest: string): RateLimitRule {
  return {
    bucket: 'inbound',
    key: keyDigest,
    limit: INBOUND_LIMIT_PER_MIN,
    windowMs: WINDOW_MS,
    fixedRetryAfterSeconds: 60,
  }
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

/**
 * Host of Origin, else of Referer; null when there is none. A browser that sends an Origin says
 * where the request comes from, so Referer is read only when Origin is absent: `Origin: null`
 * (sandboxed iframes, `file:`, data: URLs, some redirects) or any Origin that is not a URL names
 * no host, and a Referer beside it, which the page controls, cannot stand in for it.
 */
export function requestHost(request: Request): string | null {
  const origin = request.headers.get('origin')
  const value = origin ?? request.headers.get('referer')
  if (!value || value === 'null') return null
  try {
    const host = new URL(value).hostname.toLowerCase().replace(/^\[|\]$/g, '')
    return host || null
  } catch {
    return null
  }
}

/** `example.com` matches itself only; `*.example.com` matches any subdomain, not the apex. */
export function hostAllowed(host: string, allowlist: readonly string[]): boolean {
  for (const entry of allowlist) {
    if (entry.startsWith('*.')) {
      if (host.endsWith(entry.slice(1)) && host.length > entry.length - 1) return true
    } else if (host === entry) return true
  }
  return false
}

export function allowListRefusal(source: CachedSource, clientIp: string, request: Request): AppError | null {
  if (source.ipRanges.length > 0 && !ipInRanges(clientIp, source.ipRanges)) {
    return new AppError('ip_not_allowed', `requests from ${clientIp} are not in this source's IP allow list`)
  }
  if (source.domainAllowlist.length > 0) {
    const host = requestHost(request)
    if (!host || !hostAllowed(host, source.domainAllowlist)) {
      return new AppError(
        'domain_not_allowed',
        host
          ? `requests from ${host} are not in this source's domain allow list`
          : 'this source has a domain allow list: send an Origin or Referer header from an allowed domain',
      )
    }
  }
  return null
}

const EXPOSED_HEADERS =
  'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After'

/**
 * CORS for the webhook URL: `*` when the source has no domain allow list, else the Origin echoed.
 * The echo is sent on refusals too, so a browser script can read why it was refused.
 */
export function corsHeaders(source: CachedSource | null, origin: string | null): Record<string, string> {
  if (!origin) return {}
  // `null` is never echoed: `Access-Control-Allow-Origin: null` would let any sandboxed or file:
  // page read the answer. Without a domain list the answer is `*` anyway.
  if (origin === 'null' && source && source.domainAllowlist.length > 0) return {}
  if (!source || source.domainAllowlist.length === 0) {
    return { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED_HEADERS }
  }
  return {
    'access-control-allow-origin': origin,
    vary: 'Origin',
    'access-control-expose-headers': EXPOSED_HEADERS,
  }
}
