import { beforeAll, describe, expect, test } from 'bun:test'
import { asc, eq } from 'drizzle-orm'
import { runCli } from '../../src/cli/index'
import { sourcesCreate } from '../../src/cli/sources'
import { webhookSources } from '../../src/db/schema'
import { digestSecret, isWellFormedSecret } from '../../src/lib/secrets'
import { buildServices } from '../../src/services'
import { captureIo } from '../helpers/cli'
import { createOrganization } from '../helpers/factories'
import { makeTestContext, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

const URL_PREFIX = 'http://lead-capture.test/api/webhook/lead/'

describe('cli: sources create', () => {
  test('one source by default, named as given; stdout is its webhook URL and nothing else', async () => {
    const ctx = await makeTestContext()
    const organization = await createOrganization(ctx)
    const { io, out } = captureIo()
    const code = await sourcesCreate(ctx, ['--org', organization.id, '--name', 'Landing page'], io)
    expect(code).toBe(0)
    const lines = out.stdout.split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[1]).toBe('')
    const url = lines[0]!
    expect(url.startsWith(URL_PREFIX)).toBe(true)
    const key = url.slice(URL_PREFIX.length)
    expect(isWellFormedSecret('source_key', key)).toBe(true)
    const rows = await ctx.db
      .select()
      .from(webhookSources)
      .where(eq(webhookSources.organizationId, organization.id))
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({
      name: 'Landing page',
      enabled: true,
      keyDigest: digestSecret(key),
      keyHint: key.slice(-4),
    })
    expect(out.stderr).toContain('created 1 source')
  })

  test('--count K creates K numbered sources in batches; every printed URL resolves to one of them', async () => {
    const ctx = await makeTestContext()
    const organization = await createOrganization(ctx)
    const { io, out } = captureIo()
    const started = performance.now()
    const code = await sourcesCreate(
      ctx,
      ['--org', organization.id, '--name', 'Bench', '--count', '1200'],
      io,
    )
    const elapsed = performance.now() - started
    expect(code).toBe(0)
    const urls = out.stdout.trimEnd().split('\n')
    expect(urls).toHaveLength(1200)
    expect(new Set(urls).size).toBe(1200)
    for (const url of urls) expect(url.startsWith(URL_PREFIX)).toBe(true)
    const rows = await ctx.db
      .select({ id: webhookSources.id, name: webhookSources.name, keyDigest: webhookSources.keyDigest })
      .from(webhookSources)
      .where(eq(webhookSources.organizationId, organization.id))
      .orderBy(asc(webhookSources.id))
    expect(rows).toHaveLength(1200)
    expect(rows.map((row) => row.name)).toEqual(
      Array.from({ length: 1200 }, (_, index) => `Bench ${index + 1}`),
    )
    // URL i belongs to source i (the order printed is the order created).
    const digests = urls.map((url) => digestSecret(url.slice(URL_PREFIX.length)))
    expect(rows.map((row) => row.keyDigest)).toEqual(digests)
    const cache = buildServices(ctx).sourceCache
    for (const index of [0, 999, 1000, 1199]) {
      expect((await cache.findByKeyDigest(digests[index]!))?.id).toBe(rows[index]!.id)
    }
    // Batched inserts: well under a second per thousand even on the embedded database.
    expect(elapsed).toBeLessThan(10_000)
  })

  test('through the CLI entry: bad arguments exit 2 with usage; an unknown organization exits 1; stdout stays empty', async () => {
    const ctx = await makeTestContext()
    const organization = await createOrganization(ctx)
    const cases: Array<[string[], number, string]> = [
      [['--org', organization.id], 2, '--name is required'],
      [['--name', 'x'], 2, '--org must be'],
      [['--org', 'not-a-uuid', '--name', 'x'], 2, '--org must be'],
      [['--org', organization.id, '--name', 'x', '--count', '0'], 2, '--count must be'],
      [['--org', organization.id, '--name', 'x', '--count', '2.5'], 2, '--count must be'],
      [['--org', organization.id, '--name', 'x', '--count', '100001'], 2, '--count must be'],
      [['--org', organization.id, '--name', 'x', '--colour', 'red'], 2, 'colour'],
      [['--org', '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e', '--name', 'x'], 1, 'no organization'],
    ]
    for (const [args, expectedCode, message] of cases) {
      const { io, out } = captureIo()
      const code = await runCli(['sources', 'create', ...args], { ctx, io })
      expect({ args, code }).toEqual({ args, code: expectedCode })
      expect(out.stdout).toBe('')
      expect(out.stderr).toContain(message)
      if (expectedCode === 2) expect(out.stderr).toContain('usage: bun run cli sources create')
    }
    const rows = await ctx.db
      .select()
      .from(webhookSources)
      .where(eq(webhookSources.organizationId, organization.id))
    expect(rows).toHaveLength(0)
    // And a good invocation through the same entry prints exactly the URLs.
    const { io, out } = captureIo()
    expect(
      await runCli(['sources', 'create', '--org', organization.id, '--name', 'Via CLI', '--count', '3'], {
        ctx,
        io,
      }),
    ).toBe(0)
    expect(out.stdout.trimEnd().split('\n')).toHaveLength(3)
    for (const line of out.stdout.trimEnd().split('\n')) expect(line.startsWith(URL_PREFIX)).toBe(true)
  })
})
