import type { AppContext } from '../context'
import { isUuid } from '../lib/ids'
import { WebhookEndpointsRepository } from '../modules/webhook-endpoints/repository'
import { parseOptions, UsageError } from './args'
import type { CliCommand, CommandIo } from './commands'

const RESEAL_USAGE = 'usage: bun run cli webhooks reseal [--organization <organization id>]'

/**
 * Prints `{"endpoints", "resealed", "changed_meanwhile", "unreadable"}`. Run after
 * WEBHOOK_SECRETS_KEY was replaced (the old key in WEBHOOK_SECRETS_PREVIOUS_KEYS): every signing
 * secret is sealed again with the new key, after which the old one can be removed. Running it again
 * reseals nothing. Exit code 1 when a secret opens with none of the keys (its endpoint's id is in
 * `unreadable`; the rest are resealed): that endpoint cannot sign until its secret is rotated.
 */
async function reseal(ctx: AppContext, args: string[], io: CommandIo): Promise<number> {
  const { values } = parseOptions(args, ['organization'], 0)
  const organizationId = values.organization?.toLowerCase()
  if (organizationId !== undefined && !isUuid(organizationId))
    throw new UsageError([`"${values.organization}" is not an organization id (UUID)`])
  const result = await new WebhookEndpointsRepository(ctx).resealSecrets(ctx.secretBox, organizationId)
  io.stdout(
    `${JSON.stringify({
      endpoints: result.endpoints,
      resealed: result.resealed,
      changed_meanwhile: result.changedMeanwhile,
      unreadable: result.unreadable,
    })}\n`,
  )
  if (result.unreadable.length === 0) return 0
  io.stderr(
    `${result.unreadable.length} endpoint(s) have a secret that opens with none of the configured keys (WEBHOOK_SECRETS_KEY, WEBHOOK_SECRETS_PREVIOUS_KEYS): add the key that sealed it, or rotate their secrets\n`,
  )
  return 1
}

export const webhooksResealCommand: CliCommand = {
  name: 'webhooks reseal',
  usage: RESEAL_USAGE,
  description:
    "Seal every endpoint's signing secrets again with WEBHOOK_SECRETS_KEY (after a key rotation); prints counts as JSON",
  run: reseal,
}
