import type { AppContext } from '../../context'
import { creationPosition, decodeCursor, pageOf } from '../../lib/cursor'
import { AppError, errors } from '../../lib/errors'
import { isUuid, newId } from '../../lib/ids'
import { parseOutboundUrl, resolveOutboundTarget } from '../../lib/outbound-url'
import { generateWebhookSecret } from '../../lib/secrets'
import {
  type CreateEndpointBody,
  ENDPOINTS_PER_ORGANIZATION_MAX,
  type EndpointList,
  type EndpointListQuery,
  type EndpointRecord,
  type EndpointWithSecret,
  type EventType,
  type MessageList,
  type MessageListQuery,
  type MessageRecord,
  type MessageStatus,
  PREVIOUS_SECRET_GRACE_MS,
  type UpdateEndpointBody,
} from './model'
import {
  type DeliveryStats,
  type EndpointChanges,
  type EndpointRow,
  type NewEvent,
  WebhookEndpointsRepository,
} from './repository'
import type { DeliverySignal } from './signal'

const NO_STATS: DeliveryStats = { pending: 0, succeeded: 0, failed: 0, lastAttemptAt: null }

function toEndpointRecord(row: EndpointRow, stats: DeliveryStats = NO_STATS): EndpointRecord {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: row.eventTypes as EventType[],
    source_ids: row.sourceIds,
    enabled: row.enabled,
    disabled_reason: row.disabledReason,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    stats: {
      pending: stats.pending,
      succeeded: stats.succeeded,
      failed: stats.failed,
      last_attempt_at: stats.lastAttemptAt?.toISOString() ?? null,
    },
  }
}

export class WebhookEndpointsService {
  readonly repository: WebhookEndpointsRepository

  constructor(
    private readonly ctx: AppContext,
    /** Wakes this replica's delivery worker when something is queued. */
    private readonly signal: DeliverySignal,
  ) {
    this.repository = new WebhookEndpointsRepository(ctx)
  }

  async list(organizationId: string, query: EndpointListQuery): Promise<EndpointList> {
    const limit = query.limit ?? 50
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const page = pageOf(
      await this.repository.list(organizationId, { limit, beforeId }),
      limit,
      creationPosition,
    )
    const stats = await this.repository.stats(page.rows.map((row) => row.id))
    return {
      data: page.rows.map((row) => toEndpointRecord(row, stats.get(row.id))),
      next_cursor: page.nextCursor,
    }
  }

  async get(organizationId: string, id: string): Promise<EndpointRecord> {
    const row = await this.require(organizationId, id)
    return toEndpointRecord(row, (await this.repository.stats([row.id])).get(row.id))
  }

  async create(organizationId: string, body: CreateEndpointBody): Promise<EndpointWithSecret> {
    const url = await this.checkedUrl(body.url)
    const sourceIds = await this.checkedSourceIds(organizationId, body.source_ids)
    if ((await this.repository.countForOrganization(organizationId)) >= ENDPOINTS_PER_ORGANIZATION_MAX) {
      throw new AppError(
        'endpoint_limit_reached',
        `an organization has at most ${ENDPOINTS_PER_ORGANIZATION_MAX} webhook endpoints`,
      )
    }
    const secret = generateWebhookSecret()
    const now = new Date(this.ctx.clock.now())
    const row = await this.repository.insert({
      id: newId(),
      organizationId,
      url,
      description: body.description?.trim() ?? '',
      eventTypes: body.event_types ?? [],
      sourceIds: sourceIds ?? [],
      enabled: body.enabled ?? true,
      // Created disabled: disabled from the start, for the fan-out's rule (repository.ts FAN_OUT).
      pauses: body.enabled === false ? [[now.toISOString(), null]] : [],
      secretCiphertext: this.ctx.secretBox.seal(secret),
      createdAt: now,
      updatedAt: now,
    })
    return { ...toEndpointRecord(row), secret, previous_secret_expires_at: null }
  }

  async update(organizationId: string, id: string, body: UpdateEndpointBody): Promise<EndpointRecord> {
    if (!isUuid(id)) throw notFound()
    const changes: EndpointChanges = {}
    if (body.url !== undefined) changes.url = await this.checkedUrl(body.url)
    if (body.description !== undefined) changes.description = body.description.trim()
    if (body.event_types !== undefined) changes.eventTypes = body.event_types
    if (body.source_ids !== undefined)
      changes.sourceIds = await this.checkedSourceIds(organizationId, body.source_ids)
    if (body.enabled !== undefined) {
      changes.enabled = body.enabled
      // Turned back on by a person: the failure streak that disabled it starts over.
      if (body.enabled) {
        changes.disabledReason = null
        changes.failingSince = null
      }
    }
    if (Object.keys(changes).length === 0) return this.get(organizationId, id)
    changes.updatedAt = new Date(this.ctx.clock.now())
    const row = await this.repository.update(organizationId, id, changes)
    if (!row) throw notFound()
    if (body.enabled) this.signal.wake()
    return toEndpointRecord(row, (await this.repository.stats([row.id])).get(row.id))
  }

  async remove(organizationId: string, id: string): Promise<void> {
    if (!isUuid(id) || !(await this.repository.delete(organizationId, id))) throw notFound()
  }

  /**
   * A new secret at once; the old one keeps signing alongside it for 24 hours (two signatures in
   * `webhook-signature`), so receivers can switch without rejecting a message.
   */
  async rotateSecret(organizationId: string, id: string): Promise<EndpointWithSecret> {
    if (!isUuid(id)) throw notFound()
    const secret = generateWebhookSecret()
    const now = this.ctx.clock.now()
    const previousExpiresAt = new Date(now + PREVIOUS_SECRET_GRACE_MS)
    const row = await this.repository.rotateSecret(organizationId, id, {
      sealed: this.ctx.secretBox.seal(secret),
      previousExpiresAt,
      now: new Date(now),
    })
    if (!row) throw notFound()
    const stats = (await this.repository.stats([row.id])).get(row.id)
    return {
      ...toEndpointRecord(row, stats),
      secret,
      previous_secret_expires_at: previousExpiresAt.toISOString(),
    }
  }

  async listMessages(organizationId: string, id: string, query: MessageListQuery): Promise<MessageList> {
    const endpoint = await this.require(organizationId, id)
    const limit = query.limit ?? 50
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const rows = await this.repository.listMessages(endpoint.id, {
      limit,
      beforeId,
      status: query.status,
      eventType: query.event_type,
    })
    const page = pageOf(rows, limit, creationPosition)
    const attempts = await this.repository.attemptsOf(
      endpoint.id,
      page.rows.map((row) => row.id),
    )
    const data: MessageRecord[] = page.rows.map((row) => ({
      id: row.id,
      event_type: row.eventType as EventType,
      status: row.status as MessageStatus,
      attempt_count: row.attemptCount,
      next_attempt_at: row.status === 'pending' ? row.nextAttemptAt.toISOString() : null,
      created_at: row.createdAt.toISOString(),
      payload: { type: row.eventType, timestamp: row.createdAt.toISOString(), data: row.payload },
      attempts: (attempts.get(row.id) ?? []).map((attempt) => ({
        attempted_at: attempt.attemptedAt.toISOString(),
        response_status: attempt.responseStatus,
        duration_ms: attempt.durationMs,
        response_body: attempt.responseBody,
        error: attempt.error,
      })),
    }))
    return { data, next_cursor: page.nextCursor }
  }

  async retryMessage(organizationId: string, id: string, messageId: string): Promise<void> {
    const endpoint = await this.require(organizationId, id)
    const now = new Date(this.ctx.clock.now())
    if (!isUuid(messageId) || !(await this.repository.retryNow(endpoint.id, messageId, now))) {
      throw errors.notFound('message')
    }
    this.signal.wake()
  }

  async recover(organizationId: string, id: string, since: string): Promise<number> {
    const endpoint = await this.require(organizationId, id)
    const queued = await this.repository.recover(endpoint.id, new Date(since), new Date(this.ctx.clock.now()))
    if (queued > 0) this.signal.wake()
    return queued
  }

  /** Queues a `ping` for this endpoint alone, whatever its event filter (it must be enabled). */
  async ping(organizationId: string, id: string): Promise<string> {
    const endpoint = await this.require(organizationId, id)
    if (!endpoint.enabled) throw new AppError('endpoint_disabled', 'enable the endpoint before testing it')
    const messageId = newId()
    await this.enqueue({
      id: messageId,
      organizationId,
      type: 'ping',
      data: { endpoint_id: endpoint.id, message: 'ping from lead capture' },
      createdAt: new Date(this.ctx.clock.now()),
      endpointId: endpoint.id,
    })
    return messageId
  }

  /** Writes an event for the organization's subscribed endpoints and wakes the workers. */
  async enqueue(event: NewEvent): Promise<number> {
    const queued = await this.repository.enqueue(event)
    if (queued > 0) this.signal.wake()
    return queued
  }

  /** Wakes the workers for messages a caller queued through `repository` in its own, committed transaction. */
  wakeWorkers(): void {
    this.signal.wake()
  }

  private async require(organizationId: string, id: string): Promise<EndpointRow> {
    const row = isUuid(id) ? await this.repository.findById(organizationId, id) : null
    if (!row) throw notFound()
    return row
  }

  private async checkedUrl(text: string): Promise<string> {
    const policy = { allowPrivateNetworks: this.ctx.config.outboundAllowPrivateNetworks }
    const url = parseOutboundUrl(text, policy)
    await resolveOutboundTarget(url, policy)
    return url.toString()
  }

  private async checkedSourceIds(organizationId: string, ids: string[] | undefined) {
    if (ids === undefined) return undefined
    const normalized = ids.map((id) => id.toLowerCase())
    const known = await this.repository.existingSourceIds(organizationId, normalized)
    const unknown = normalized.map((id, index) => ({ id, index })).filter(({ id }) => !known.has(id))
    if (unknown.length > 0) {
      throw errors.validation(
        'source_ids names sources that do not exist',
        unknown.map(({ index }) => ({
          path: `/source_ids/${index}`,
          message: 'no source of the organization has this id',
        })),
      )
    }
    return normalized
  }
}

function notFound() {
  return errors.notFound('webhook endpoint')
}
