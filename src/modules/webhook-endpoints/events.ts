import { and, eq, gt, inArray, isNull, lte, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { personalAccessTokens, users, webhookEndpoints, webhookSources } from '../../db/schema'
import { newId } from '../../lib/ids'
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

/**
 * `source.status_changed`, the failure alert: the health status of every source whose organization
 * has an enabled endpoint taking the event is compared with the one last announced. The first
 * status seen is recorded silently (a baseline, not a change). The announcement is claimed with a
 * conditional UPDATE, so concurrent replicas announce a transition once. Returns how many were sent.
 */
export async function announceSourceStatusChanges(
  ctx: AppContext,
  { health, service }: { health: DeliveryLogsService; service: WebhookEndpointsService },
  options: { shouldStop?: () => boolean } = {},
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
  for (const source of watched) {
    if (options.shouldStop?.()) break
    let summary: Awaited<ReturnType<typeof health.health>>
    try {
      summary = await health.health(source.organizationId, source.id)
    } catch (error) {
      // Deleted meanwhile, or a failed query: the other sources are still checked.
      ctx.logger.warn('source health not checked for source.status_changed', { source_id: source.id, error })
      continue
    }
    if (summary.status === source.announced) continue
    const claimed = await ctx.db
      .update(webhookSources)
      .set({ announcedHealthStatus: summary.status })
      .where(
        and(
          eq(webhookSources.id, source.id),
          sql`${webhookSources.announcedHealthStatus} is not distinct from ${source.announced}`,
        ),
      )
      .returning({ id: webhookSources.id })
    if (claimed.length === 0 || source.announced === null) continue
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
    announced++
  }
  return announced
}
