import { parseArgs } from 'node:util'
import { eq } from 'drizzle-orm'
import type { AppContext } from '../context'
import { organizations } from '../db/schema'
import { AppError } from '../lib/errors'
import { isUuid } from '../lib/ids'
import { sourcesService } from '../modules/sources/service'

/** Where a command writes: stdout carries only the result, so scripts can pipe it. */
export interface CommandIo {
  stdout(text: string): void
  stderr(text: string): void
}

export const processIo: CommandIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
}

export const SOURCES_CREATE_MAX_COUNT = 100_000

const USAGE = 'usage: bun run cli sources create --org <organization id> --name <name> [--count <1-100000>]'

/**
 * `sources create`: provisions sources for an organization and prints their webhook URLs, one per
 * line and nothing else on stdout. With --count K > 1 the sources are named "<name> 1" … "<name> K".
 * Keys are issued by the sources service (the same path as the API) and inserted in multi-row
 * batches, so thousands of sources take a few round trips. Returns the exit code.
 */
export async function sourcesCreate(
  ctx: AppContext,
  args: string[],
  io: CommandIo = processIo,
): Promise<number> {
  let values: { org?: string; name?: string; count?: string }
  try {
    values = parseArgs({
      args,
      options: { org: { type: 'string' }, name: { type: 'string' }, count: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (error) {
    io.stderr(`${(error as Error).message}\n${USAGE}\n`)
    return 2
  }
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
  if (problems.length > 0) {
    io.stderr(`${problems.join('\n')}\n${USAGE}\n`)
    return 2
  }

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
  try {
    const created = await sourcesService(ctx).createMany(organization.id, bodies)
    io.stdout(`${created.map((source) => source.webhook_url).join('\n')}\n`)
  } catch (error) {
    if (!(error instanceof AppError)) throw error
    io.stderr(`${error.message}\n`)
    return 1
  }
  io.stderr(`created ${count} source${count === 1 ? '' : 's'} in organization ${organization.id}\n`)
  return 0
}

/** Registry entry: `bun run cli sources create …`. */
export const sourcesCreateCommand = {
  name: 'sources create',
  usage: USAGE,
  description: 'Create webhook sources in bulk and print their webhook URLs, one per line',
  run: sourcesCreate,
}
