import { and, eq, gt, inArray, isNull, lte, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { personalAccessTokens, users, webhookEndpoints, webhookSources } from '../../db/schema'
import { newId } from '../../lib/ids'
import type { HealthStatus } from '../delivery-logs/model'
import type { DeliveryLogsService } from '../delivery-logs/service'
import type { WebhookEndpointsService } from './service'

/** `pat.expiring` is sent this long before a token expires. */
export const PAT_EXPIRY_NOTICE_MS = 7 * 24 * 3600_000

/**
 * `pat.expiring`: every token that expires within 7 days and has not been announced yet. The mark
 * and the events are one transaction: a crash (or a failed write) between them would otherwise
 * leave a token marked as announced whose alert was never written. The mark is a conditional
 * UPDATE, so of several replicas only one announces a token (the others wait on its row lock and
 * then find it marked). Returns how many tokens were announced.
 */
export async function announceExpiringTokens(
  ctx: AppContext,
  service: WebhookEndpointsService,
): Promise<number> {
  const now = ctx.clock.now()
  const repository = service.repository
  const { announced, queued } = await ctx.db.transaction(async (tx) => {
    const claimed = await tx
      .update(personalAccessTokens)
      .set({ expiryNoticeAt: new Date(now) })
      .where(
        and(
          isNull(personalAccessTokens.expiryNoticeAt),
          isNull(personalAccessTokens.revokedAt),
          gt(personalAccessTokens.expiresAt, new Date(now)),
          lte(personalAccessTokens.expiresAt, new Date(now + PAT_EXPIRY_NOTICE_MS)),
        ),
      )
      .returning({
        id: personalAccessTokens.id,
        name: personalAccessTokens.name,
        organizationId: personalAccessTokens.organizationId,
        userId: personalAccessTokens.userId,
        expiresAt: personalAccessTokens.expiresAt,
      })
    if (claimed.length === 0) return { announced: 0, queued: 0 }
    const owners = await tx
      .select({ id: users.id, email: users.email })
      .from(users)
      .where(inArray(users.id, [...new Set(claimed.map((token) => token.userId))]))
    const emails = new Map(owners.map((owner) => [owner.id, owner.email]))
    let queued = 0
    for (const token of claimed) {
      queued += await repository.enqueue(
        {
          id: newId(),
          organizationId: token.organizationId,
          type: 'pat.expiring',
          data: {
            token_id: token.id,
            name: token.name,
            owner_email: emails.get(token.userId) ?? '',
            expires_at: token.expiresAt!.toISOString(),
          },
          createdAt: new Date(now),
        },
        tx,
      )
    }
    return { announced: claimed.length, queued }
  })
  // Committed: the workers may see the messages now.
  if (queued > 0) service.wakeWorkers()
  return announced
}

/** Watched sources whose status one statement computes (DeliveryLogsService.statuses). */
export const STATUS_BATCH_SIZE = 500

/**
 * `source.status_changed`, the failure alert: the health status of every source whose organization
 * has an enabled endpoint taking the event is compared with the one last announced. The first
 * status seen is recorded silently (a baseline, not a change). The announcement is claimed with a
 * conditional UPDATE, so concurrent replicas announce a transition once. Returns how many were sent.
 * Statuses are read STATUS_BATCH_SIZE sources per statement; the full health summary (the event's
 * payload) only for a source whose status moved, and its status is the one claimed.
 */
export async function announceSourceStatusChanges(
  ctx: AppContext,
  { health, service }: { health: DeliveryLogsService; service: WebhookEndpointsService },
  options: { shouldStop?: () => boolean; batchSize?: number } = {},
): Promise<number> {
  const watched = await ctx.db
    .selectDistinct({
      id: webhookSources.id,
      organizationId: webhookSources.organizationId,
      name: webhookSources.name,
      announced: webhookSources.announcedHealthStatus,
    })
    .from(webhookSources)
    .innerJoin(
      webhookEndpoints,
      and(
        eq(webhookEndpoints.organizationId, webhookSources.organizationId),
        eq(webhookEndpoints.enabled, true),
        sql`(${webhookEndpoints.eventTypes} = '[]'::jsonb or ${webhookEndpoints.eventTypes} ? 'source.status_changed')`,
        sql`(${webhookEndpoints.sourceIds} = '[]'::jsonb or ${webhookEndpoints.sourceIds} ? ${webhookSources.id}::text)`,
      ),
    )
  let announced = 0
  const batchSize = options.batchSize ?? STATUS_BATCH_SIZE
  for (let start = 0; start < watched.length; start += batchSize) {
    if (options.shouldStop?.()) break
    const batch = watched.slice(start, start + batchSize)
    let statuses: Map<string, HealthStatus>
    try {
      statuses = await health.statuses(batch.map((source) => source.id))
    } catch (error) {
      // A failed query: the next batches are still checked, this one on the next run.
      ctx.logger.warn('source statuses not checked for source.status_changed', {
        sources: batch.length,
        error,
      })
      continue
    }
    const baselines: Array<{ id: string; status: HealthStatus }> = []
    for (const source of batch) {
      if (options.shouldStop?.()) break
      const status = statuses.get(source.id)
      // Deleted meanwhile (missing), or unchanged: nothing to announce, no health() to read.
      if (status === undefined || status === source.announced) continue
      if (source.announced === null) baselines.push({ id: source.id, status })
      else announced += await announceChange(ctx, { health, service }, source)
    }
    await recordBaselines(ctx, baselines)
  }
  return announced
}

/**
 * The first status seen of each source, recorded silently, in one statement per batch (a new
 * deployment's first run has one per watched source). Only where none is recorded yet: a replica
 * that recorded one meanwhile wins.
 */
async function recordBaselines(ctx: AppContext, baselines: Array<{ id: string; status: HealthStatus }>) {
  if (baselines.length === 0) return
  await sqlRows(
    ctx.db,
    sql`update webhook_sources s set announced_health_status = v.status
      from jsonb_to_recordset(${JSON.stringify(baselines)}::jsonb) as v(id uuid, status text)
      where s.id = v.id and s.announced_health_status is null`,
  )
}

/** A status that moved: the full health summary (the event's payload), then the claim. */
async function announceChange(
  ctx: AppContext,
  { health, service }: { health: DeliveryLogsService; service: WebhookEndpointsService },
  source: { id: string; organizationId: string; name: string; announced: string | null },
): Promise<number> {
  let summary: Awaited<ReturnType<typeof health.health>>
  try {
    summary = await health.health(source.organizationId, source.id)
  } catch (error) {
    // Deleted meanwhile, or a failed query: the other sources are still checked.
    ctx.logger.warn('source health not checked for source.status_changed', { source_id: source.id, error })
    return 0
  }
  // Read a moment after the batch's: the summary's status is the one claimed and sent.
  if (summary.status === source.announced) return 0
  if (!(await claim(ctx, source, summary.status))) return 0
  const { hourly: _hourly, recent_problems: _recentProblems, ...brief } = summary
  await service.enqueue({
    id: newId(),
    organizationId: source.organizationId,
    type: 'source.status_changed',
    data: {
      source: { id: source.id, name: source.name },
      previous_status: source.announced,
      status: summary.status,
      health: brief,
    },
    createdAt: new Date(ctx.clock.now()),
    sourceId: source.id,
  })
  return 1
}

/** Moves the announced status if no replica moved it since it was read; true when this one did. */
async function claim(
  ctx: AppContext,
  source: { id: string; announced: string | null },
  status: HealthStatus,
): Promise<boolean> {
  const claimed = await ctx.db
    .update(webhookSources)
    .set({ announcedHealthStatus: status })
    .where(
      and(
        eq(webhookSources.id, source.id),
        sql`${webhookSources.announcedHealthStatus} is not distinct from ${source.announced}`,
      ),
    )
    .returning({ id: webhookSources.id })
  return claimed.length > 0
}
