import type { AppContext } from '../../context'
import { type CursorPosition, decodeCursor, MICROSECOND_INSTANT, pageOf } from '../../lib/cursor'
import { AppError } from '../../lib/errors'
import { DEFAULT_PAGE_SIZE } from '../../lib/schemas'
import { maskSecretsInText } from '../../lib/secrets'
import { foldAggregates, HOUR_MS, successRate } from './health-fold'
import type {
  HealthStatus,
  LogEntry,
  LogEntryWithBody,
  LogPage,
  LogsQuery,
  Outcome,
  SourceHealth,
} from './model'
import { DeliveryLogsRepository, type LogRow, type RecentRow } from './repository'

const WINDOW_HOURS = 24
const PROBLEM_LIST_SIZE = 10

/** Outcomes where the integration did its job: a lead was stored, or the request was filtered as spam. */
export const SUCCESS_OUTCOMES: readonly Outcome[] = ['created', 'updated', 'spam']
/** Outcomes where a delivery did not go through: no contact in the body, or a 4xx (429 included). */
export const FAILURE_OUTCOMES: readonly Outcome[] = ['error', 'rejected']
/** What the health view lists as "problem deliveries": spam is shown too, so a real lead caught by the filter can be found. */
export const PROBLEM_OUTCOMES: readonly Outcome[] = ['spam', 'error', 'rejected']

/**
 * Status rules (also in the OpenAPI description), checked in this order:
 * - `disabled`: the source is disabled.
 * - `idle`: no request in the window.
 * - `failing`: the latest 5 requests in the window all failed, or at least 5 of the latest 20
 *   requests are counted and more than half of them failed.
 * - `degraded`: the window's success rate is under 95%, or the latest request failed.
 * - `healthy`: otherwise.
 * A row with `repeat_count` n counts as n requests (a 429 flood fails fast).
 */
export const STATUS_RULES = {
  recentRequests: 20,
  consecutiveFailures: 5,
  minRecentForRate: 5,
  failingBelow: 0.5,
  degradedBelow: 0.95,
} as const

export const HEALTH_STATUS_DESCRIPTION = [
  'Status, checked in this order: `disabled` when the source is disabled; `idle` when it received no request in',
  'the window; `failing` when its latest 5 requests all failed, or when more than half of its latest 20 requests',
  '(at least 5) failed; `degraded` when the success rate of the window is under 95% or the latest request failed;',
  '`healthy` otherwise. Success = `created`, `updated` or `spam` (spam is delivered and filtered: the integration',
  'works); failure = `error` (no usable contact) or `rejected` (any 4xx, 429 included). Counts sum `repeat_count`,',
  'so an aggregated 429 row counts for every request it stands for.',
].join(' ')

function receivedAtOf(position: CursorPosition): { receivedAt: string; id: string } {
  return { receivedAt: position.sortKey, id: position.id }
}

function maskOrNull(value: string | null): string | null {
  return value === null ? null : maskSecretsInText(value)
}

export function toEntry(row: LogRow): LogEntry {
  const spamReasons = typeof row.spam_reasons === 'string' ? JSON.parse(row.spam_reasons) : row.spam_reasons
  return {
    id: row.id,
    received_at: new Date(row.received_at_text).toISOString(),
    method: row.method,
    http_status: row.http_status,
    outcome: row.outcome,
    reason: maskOrNull(row.reason),
    lead_id: row.lead_id,
    client_ip: row.client_ip,
    origin: maskOrNull(row.origin),
    user_agent: maskOrNull(row.user_agent),
    body_bytes: row.body_bytes,
    body_truncated: row.body_truncated,
    spam_reasons: spamReasons,
    duration_ms: row.duration_ms,
    repeat_count: row.repeat_count,
  }
}

/** Parsed JSON when the stored body is complete and is a JSON object or array; else the (masked) text. */
export function presentBody(body: string | null, truncated: boolean): LogEntryWithBody['body'] {
  if (body === null) return null
  const masked = maskSecretsInText(body)
  if (truncated) return masked
  try {
    const parsed: unknown = JSON.parse(masked)
    if (typeof parsed === 'object' && parsed !== null) return parsed as Record<string, unknown>
  } catch {}
  return masked
}

export class DeliveryLogsService {
  readonly repository: DeliveryLogsRepository

  constructor(private readonly ctx: AppContext) {
    this.repository = new DeliveryLogsRepository(ctx)
  }

  /** 404 for an unknown source and for another organization's, with the same body. */
  private async source(organizationId: string, sourceId: string) {
    const source = await this.repository.findSource(sourceId, organizationId)
    if (!source) throw new AppError('source_not_found', 'source not found')
    return source
  }

  async list(organizationId: string, sourceId: string, query: LogsQuery): Promise<LogPage> {
    await this.source(organizationId, sourceId)
    const limit = query.limit ?? DEFAULT_PAGE_SIZE
    const rows = await this.repository.list({
      sourceId,
      limit: limit + 1,
      outcome: query.outcome,
      status: query.status,
      since: query.since,
      until: query.until,
      after: query.cursor ? receivedAtOf(decodeCursor(query.cursor, MICROSECOND_INSTANT)) : undefined,
    })
    const page = pageOf(rows, limit, (row) => ({ sortKey: row.received_at_text, id: row.id }))
    return { data: page.rows.map(toEntry), next_cursor: page.nextCursor }
  }

  async get(organizationId: string, sourceId: string, logId: string): Promise<LogEntryWithBody> {
    await this.source(organizationId, sourceId)
    const row = await this.repository.get(sourceId, logId)
    if (!row) throw new AppError('log_not_found', 'delivery-log entry not found')
    return { ...toEntry(row), body: presentBody(row.body, row.body_truncated) }
  }

  async health(organizationId: string, sourceId: string): Promise<SourceHealth> {
    const source = await this.source(organizationId, sourceId)
    const now = this.ctx.clock.now()
    const currentHour = Math.floor(now / HOUR_MS) * HOUR_MS
    const from = currentHour - (WINDOW_HOURS - 1) * HOUR_MS
    const end = currentHour + HOUR_MS
    const [aggregates, recent, latest, problems] = await Promise.all([
      this.repository.aggregates(sourceId, new Date(from), new Date(end)),
      this.repository.recent(sourceId, STATUS_RULES.recentRequests),
      this.repository.latestByOutcome(sourceId, [...SUCCESS_OUTCOMES, ...FAILURE_OUTCOMES]),
      this.repository.latestProblems(sourceId, PROBLEM_OUTCOMES, PROBLEM_LIST_SIZE),
    ])

    const folded = foldAggregates(aggregates, from, WINDOW_HOURS)

    const latestOf = (outcomes: readonly Outcome[]) =>
      latest
        .filter((row) => outcomes.includes(row.outcome))
        .reduce<RecentRow | null>((best, row) => (best && best.at_ms >= row.at_ms ? best : row), null)
    const lastSuccess = latestOf(SUCCESS_OUTCOMES)
    const lastFailure = latestOf(FAILURE_OUTCOMES)

    return {
      source_id: sourceId,
      window: { from: new Date(from).toISOString(), to: new Date(now).toISOString() },
      status: healthStatus({
        enabled: source.enabled,
        requests: folded.totals.requests,
        successRate: folded.success_rate,
        recent: recent.filter((row) => row.at_ms >= from),
      }),
      totals: folded.totals,
      rejections: folded.rejections,
      success_rate: folded.success_rate,
      last_request_at: recent[0] ? new Date(recent[0].at_ms).toISOString() : null,
      last_success_at: lastSuccess ? new Date(lastSuccess.at_ms).toISOString() : null,
      last_failure: lastFailure
        ? {
            at: new Date(lastFailure.at_ms).toISOString(),
            http_status: lastFailure.http_status,
            reason: maskOrNull(lastFailure.reason),
          }
        : null,
      latency_ms: folded.latency_ms,
      hourly: folded.hourly,
      recent_problems: problems.map(toEntry),
    }
  }

  /**
   * The health status of many sources at once, as health() would give each (its status only), in
   * one statement: the periodic source.status_changed check reads every watched source every
   * minute, and one health() per source was ~5 statements each (50,000 a minute for 10,000
   * sources, measured 19-56 s a run and 6.5-12 s of this thread's CPU: bench/job-stalls.ts).
   * Sources not found (deleted meanwhile) are missing from the map.
   */
  async statuses(sourceIds: readonly string[]): Promise<Map<string, HealthStatus>> {
    const now = this.ctx.clock.now()
    const currentHour = Math.floor(now / HOUR_MS) * HOUR_MS
    const from = currentHour - (WINDOW_HOURS - 1) * HOUR_MS
    const rows = await this.repository.statusInputs(
      sourceIds,
      new Date(from),
      new Date(currentHour + HOUR_MS),
      {
        success: SUCCESS_OUTCOMES,
        failure: FAILURE_OUTCOMES,
        recent: STATUS_RULES.recentRequests,
        leading: STATUS_RULES.consecutiveFailures,
      },
    )
    const statuses = new Map<string, HealthStatus>()
    for (const row of rows) {
      statuses.set(
        row.source_id,
        statusOf({
          enabled: row.enabled,
          requests: row.requests,
          successRate: successRate(row.successes, row.requests),
          latest: {
            count: row.latest_count,
            failures: row.latest_failures,
            leadingFailures: row.leading_failures,
            latestFailed: row.latest_failed,
          },
        }),
      )
    }
    return statuses
  }
}

/**
 * The latest requests (at most STATUS_RULES.recentRequests, rows weighted by repeat_count, newest
 * first) as the status rules read them: how many, how many failed, how many of the first
 * `consecutiveFailures` failed, and whether the very latest failed. statusInputs() computes the same
 * in SQL for many sources at once.
 */
export interface LatestRequests {
  count: number
  failures: number
  leadingFailures: number
  latestFailed: boolean
}

export function latestRequestsOf(recent: Pick<RecentRow, 'outcome' | 'repeat_count'>[]): LatestRequests {
  const latest: boolean[] = []
  for (const row of recent) {
    const failed = FAILURE_OUTCOMES.includes(row.outcome)
    for (let index = 0; index < row.repeat_count && latest.length < STATUS_RULES.recentRequests; index++) {
      latest.push(failed)
    }
  }
  return {
    count: latest.length,
    failures: latest.filter(Boolean).length,
    leadingFailures: latest.slice(0, STATUS_RULES.consecutiveFailures).filter(Boolean).length,
    latestFailed: latest[0] === true,
  }
}

/** The status rules above, on the window's totals and its latest requests. */
export function statusOf(input: {
  enabled: boolean
  requests: number
  successRate: number | null
  latest: LatestRequests
}): HealthStatus {
  if (!input.enabled) return 'disabled'
  if (input.requests === 0) return 'idle'
  const { count, failures, leadingFailures, latestFailed } = input.latest
  if (leadingFailures === STATUS_RULES.consecutiveFailures) return 'failing'
  if (count >= STATUS_RULES.minRecentForRate && failures > count * STATUS_RULES.failingBelow) return 'failing'
  if ((input.successRate ?? 1) < STATUS_RULES.degradedBelow || latestFailed) return 'degraded'
  return 'healthy'
}

/** The status rules above, on the window's totals and its newest rows (newest first). */
export function healthStatus(input: {
  enabled: boolean
  requests: number
  successRate: number | null
  recent: Pick<RecentRow, 'outcome' | 'repeat_count'>[]
}): HealthStatus {
  return statusOf({ ...input, latest: latestRequestsOf(input.recent) })
}
