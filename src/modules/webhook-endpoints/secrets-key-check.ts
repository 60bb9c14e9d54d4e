import type { AppContext } from '../../context'
import { SECRETS_KEY_FILE } from '../../lib/secrets'
import { WebhookEndpointsRepository } from './repository'

/** Endpoints read at start (the newest): enough to tell a wrong key, bounded on a large database. */
export const SECRETS_KEY_CHECK_LIMIT = 100

/**
 * At start: whether this replica's keys (WEBHOOK_SECRETS_KEY, else the key kept in DATA_DIR, and
 * WEBHOOK_SECRETS_PREVIOUS_KEYS) open the signing secrets the database holds. One that does not
 * cannot sign those endpoints' deliveries: each is claimed, found unusable and left for its lease
 * (endpoint-cache.ts), so a replica started with another key (replicas each with a key of their own
 * in DATA_DIR, a DATA_DIR lost with its key, a new key set without the old one as previous) only
 * delays and logs per claim. The check says so once, at start, as an error naming the fix; the
 * replica serves anyway (its leads do not depend on the key).
 */
export async function checkSecretsKey(
  ctx: AppContext,
  repository = new WebhookEndpointsRepository(ctx),
): Promise<{ checked: number; unopened: string[] }> {
  const result = await repository.secretsOpening(ctx.secretBox, SECRETS_KEY_CHECK_LIMIT)
  if (result.unopened.length > 0) {
    ctx.logger.error(
      "webhook secrets: endpoints' signing secrets do not open with this replica's key; their deliveries wait for a replica that has it. Set the same WEBHOOK_SECRETS_KEY on every replica (a replaced key goes in WEBHOOK_SECRETS_PREVIOUS_KEYS), or rotate those endpoints' secrets",
      {
        checked: result.checked,
        unopened: result.unopened.length,
        endpoint_ids: result.unopened.slice(0, 5),
        key: ctx.config.webhookSecretsKey ? 'WEBHOOK_SECRETS_KEY' : `DATA_DIR/${SECRETS_KEY_FILE}`,
      },
    )
  }
  return result
}
