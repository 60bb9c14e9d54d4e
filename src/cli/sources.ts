import { eq } from 'drizzle-orm'
import type { AppContext } from '../context'
import { organizations } from '../db/schema'
import { isUuid } from '../lib/ids'
import { SourcesService } from '../modules/sources/service'
import { SourceCache } from '../modules/sources/source-cache'
import { parseOptions, UsageError } from './args'
import type { CliCommand, CommandIo } from './commands'

export const SOURCES_CREATE_MAX_COUNT = 100_000

const USAGE = 'usage: bun run cli sources create --org <organization id> --name <name> [--count <1-100000>]'

/**
 * `sources create`: provisions sources for an organization and prints their webhook URLs, one per
 * line and nothing else on stdout. With --count K > 1 the sources are named "<name> 1" … "<name> K".
 * Keys are issued by the sources service (the same path as the API) and inserted in multi-row
 * batches, so thousands of sources take a few round trips. Returns the exit code; a wrong
 * invocation throws UsageError (the CLI prints it with the usage, exit 2).
 */
export async function sourcesCreate(ctx: AppContext, args: string[], io: CommandIo): Promise<number> {
  const { values } = parseOptions(args, ['org', 'name', 'count'], 0)
  const problems: string[] = []
  const org = values.org?.trim() ?? ''
  const name = values.name?.trim() ?? ''
  if (!isUuid(org)) problems.push('--org must be an organization id (UUID)')
  if (!name) problems.push('--name is required')
  if (name.length > 190) problems.push('--name must be at most 190 characters (room for the number)')
  const count = values.count === undefined ? 1 : Number(values.count)
  if (!Number.isInteger(count) || count < 1 || count > SOURCES_CREATE_MAX_COUNT) {
    problems.push(`--count must be an integer from 1 to ${SOURCES_CREATE_MAX_COUNT}`)
  }
  if (problems.length > 0) throw new UsageError(problems)

  const [organization] = await ctx.db
    .select({ id: organizations.id })
    .from(organizations)
    .where(eq(organizations.id, org.toLowerCase()))
  if (!organization) {
    io.stderr(`no organization with id ${org}\n`)
    return 1
  }

  const bodies = Array.from({ length: count }, (_, index) => ({
    name: count === 1 ? name : `${name} ${index + 1}`,
  }))
  const created = await new SourcesService(ctx, new SourceCache(ctx)).createMany(organization.id, bodies)
  io.stdout(`${created.map((source) => source.webhook_url).join('\n')}\n`)
  io.stderr(`created ${count} source${count === 1 ? '' : 's'} in organization ${organization.id}\n`)
  return 0
}

/** Registry entry: `bun run cli sources create …`. */
export const sourcesCreateCommand: CliCommand = {
  name: 'sources create',
  usage: USAGE,
  description: 'Create webhook sources in bulk and print their webhook URLs, one per line',
  run: sourcesCreate,
}
