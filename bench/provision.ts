import { cli } from './support'

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i

/**
 * An organization and `count` webhook sources, made with the project's own CLI (the bulk
 * provisioning path a user has). Returns the source keys, taken from the printed webhook URLs.
 * `cwd`: another checkout whose CLI (and so whose migrations) make the database.
 */
export async function provisionSources(databaseUrl: string, count: number, cwd?: string): Promise<string[]> {
  return (await provisionOrganization(databaseUrl, count, cwd)).keys
}

/** provisionSources, with the organization the sources belong to (addSources adds more to it). */
export async function provisionOrganization(
  databaseUrl: string,
  count: number,
  cwd?: string,
): Promise<{ organizationId: string; keys: string[] }> {
  const env = { DATABASE_URL: databaseUrl }
  const created = await cli(
    [
      'orgs',
      'create',
      '--name',
      'Benchmark',
      '--owner-email',
      `bench-${Date.now()}@example.com`,
      '--password',
      'bench-password-123',
    ],
    env,
    cwd,
  )
  const organizationId =
    (created.match(new RegExp(`organization[_ ]id\\W+(${UUID.source})`, 'i')) ?? created.match(UUID))?.[1] ??
    created.match(UUID)?.[0]
  if (!organizationId) throw new Error(`could not read the organization id from:\n${created}`)
  return { organizationId, keys: await addSources(databaseUrl, organizationId, count, 'bench', cwd) }
}

/** `count` more sources named `<name> 1`… in the organization; returns their keys. */
export async function addSources(
  databaseUrl: string,
  organizationId: string,
  count: number,
  name: string,
  cwd?: string,
): Promise<string[]> {
  const urls = await cli(
    ['sources', 'create', '--org', organizationId, '--name', name, '--count', String(count)],
    { DATABASE_URL: databaseUrl },
    cwd,
  )
  const keys = urls
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((url) => url.split('/').pop()!)
  if (keys.length !== count || !keys.every((key) => key.startsWith('flwh_'))) {
    throw new Error(`expected ${count} webhook URLs, got ${keys.length}`)
  }
  return keys
}
