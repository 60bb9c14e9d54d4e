import { heapStats } from 'bun:jsc'
import { beforeAll, describe, expect, test } from 'bun:test'
import { webhookSources } from '../../src/db/schema'
import { newId } from '../../src/lib/ids'
import { digestSecret, generateSecret } from '../../src/lib/secrets'
import { createOrganization } from '../helpers/factories'
import { BASE, createViaApi, setup } from '../helpers/sources'
import { call, makeTestApp, testDatabase } from '../helpers/test-app'

// Opening and migrating the shared database is paid here, not by the first test's timeout.
beforeAll(async () => {
  await testDatabase()
}, 60_000)

/** Live heap after two full collections (the second catches what the first's finalizers freed). */
function liveHeapBytes(): number {
  Bun.gc(true)
  Bun.gc(true)
  return heapStats().heapSize
}

describe('source cache: what an entry costs', () => {
  // A replica caches every source that posts to it, so its live heap grows with the sources in use
  // and the collector lets the heap grow to a multiple of what is live before it runs
  // (docs/operations.md, "Memory"). An entry for a source without allow lists or mapping (the
  // common case) held ~1,140 bytes while it had fresh empty lists, a Set of its digests and a second
  // copy of the key digest; ~390 without them.
  test('a source without allow lists or field mapping costs at most 600 bytes of live heap', async () => {
    const { ctx, services } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const count = 2000
    const keys = Array.from({ length: count }, () => generateSecret('source_key'))
    const rows = keys.map((key, index) => ({
      id: newId(),
      organizationId: organization.id,
      name: `Form ${index + 1}`,
      keyDigest: digestSecret(key),
      keyHint: key.slice(-4),
    }))
    for (let start = 0; start < count; start += 500)
      await ctx.db.insert(webhookSources).values(rows.slice(start, start + 500))
    const digests = rows.map((row) => row.keyDigest)
    const cache = services.sourceCache
    const sample = await cache.findByKeyDigest(digests[count - 1]!)
    // Full against emptied: the cache's own share, whatever the database client allocated while
    // the entries were loaded. The whole suite shares this process, and other tests' timers
    // allocate and free meanwhile (one CI run measured 782 bytes once): the median of three fills
    // keeps one disturbed measurement from deciding, either way.
    const perSource: number[] = []
    for (let fill = 0; fill < 3; fill++) {
      for (let start = 0; start < count; start += 100)
        await Promise.all(digests.slice(start, start + 100).map((digest) => cache.findByKeyDigest(digest)))
      const full = liveHeapBytes()
      cache.clear()
      perSource.push((full - liveHeapBytes()) / count)
    }
    const median = perSource.sort((a, b) => a - b)[1]!
    expect(median).toBeLessThan(600)
    // Every entry with its own data.
    expect(sample).toMatchObject({
      id: rows[count - 1]!.id,
      name: `Form ${count}`,
      keyDigest: digests[count - 1],
    })
    expect(sample?.ipRanges).toEqual([])
    expect(sample?.domainAllowlist).toEqual([])
    expect(sample?.fieldMapping).toEqual({})
  })

  test('allow lists and field mapping are kept per source; the shared empty ones cannot be changed', async () => {
    const { app, services, token } = await setup()
    const cases: Array<{
      body: Record<string, unknown>
      expected: { domainAllowlist: string[]; fieldMapping: Record<string, string> }
    }> = [
      { body: {}, expected: { domainAllowlist: [], fieldMapping: {} } },
      {
        body: { domain_allowlist: ['Example.COM'], ip_allowlist: ['10.0.0.0/8'] },
        expected: { domainAllowlist: ['example.com'], fieldMapping: {} },
      },
      {
        body: { field_mapping: { your_email: 'email' } },
        expected: { domainAllowlist: [], fieldMapping: { your_email: 'email' } },
      },
    ]
    for (const { body, expected } of cases) {
      const created = await createViaApi(app, token, body)
      const cached = await services.sourceCache.findByKeyDigest(digestSecret(created.api_key))
      expect({
        body,
        cached: { domainAllowlist: cached?.domainAllowlist, fieldMapping: cached?.fieldMapping },
      }).toEqual({
        body,
        cached: expected,
      })
      expect(cached?.ipRanges.length).toBe(body.ip_allowlist ? 1 : 0)
      // A caller that tried to change an entry's lists would change every source's: it throws.
      if (cached?.domainAllowlist.length === 0)
        expect(() => (cached.domainAllowlist as string[]).push('evil.example')).toThrow()
      if (cached && Object.keys(cached.fieldMapping).length === 0)
        expect(() => {
          ;(cached.fieldMapping as Record<string, string>).email = 'x'
        }).toThrow()
    }
  })

  test('a source cached under two keys (a grace window) leaves the cache under both when it changes', async () => {
    const { app, services, token } = await setup()
    const created = await createViaApi(app, token)
    const regenerated = await (
      await call(app, token, 'POST', `${BASE}/${created.id}/regenerate-key`, { grace_seconds: 3600 })
    ).json()
    const cache = services.sourceCache
    const digests = [digestSecret(created.api_key), digestSecret(regenerated.api_key)]
    for (const digest of digests) expect((await cache.findByKeyDigest(digest))?.enabled).toBe(true)
    const disabled = await call(app, token, 'PATCH', `${BASE}/${created.id}`, { enabled: false })
    expect(disabled.status).toBe(200)
    for (const digest of digests)
      expect({ digest, enabled: (await cache.findByKeyDigest(digest))?.enabled }).toEqual({
        digest,
        enabled: false,
      })
    const deleted = await call(app, token, 'DELETE', `${BASE}/${created.id}`)
    expect(deleted.status).toBe(204)
    for (const digest of digests)
      expect({ digest, cached: await cache.findByKeyDigest(digest) }).toEqual({ digest, cached: null })
  })
})
