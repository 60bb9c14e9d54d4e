import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { createOrganization, createSource } from '../helpers/factories'
import {
  cleanupAll,
  createTestDatabase,
  pool,
  postLead,
  type Replica,
  type Sent,
  seedContext,
  spawnReplica,
  type TestDatabase,
  uniqueEmail,
} from './support'

/**
 * A 200 is sent only after the lead's transaction committed: a replica killed with SIGKILL in the
 * middle of a burst may lose the answers it had not sent yet, never a lead it had confirmed.
 */
describe.skipIf(!process.env.DATABASE_URL)('durability: SIGKILL of a replica during a burst', () => {
  let database: TestDatabase
  let ctx: AppContext
  let env: Record<string, string | undefined>

  beforeAll(async () => {
    database = await createTestDatabase()
    ctx = await seedContext(database.url)
    env = { DATABASE_URL: database.url, REDIS_URL: process.env.REDIS_URL, DATABASE_POOL_SIZE: '8' }
  }, 60_000)

  afterAll(cleanupAll, 30_000)

  test('every lead_id answered with 200 exists after the killed replica restarts', async () => {
    const organization = await createOrganization(ctx)
    // 500 requests over 20 sources: 25 per key, well under the 60/min limit.
    const sources = await Promise.all(Array.from({ length: 20 }, () => createSource(ctx, organization.id)))
    const victim = await spawnReplica({ env })
    const survivor = await spawnReplica({ env })
    const replicas: Replica[] = [victim, survivor]

    let answered = 0
    let killedAfter = -1
    const tasks = Array.from({ length: 500 }, (_, index) => async (): Promise<Sent> => {
      const sent = await postLead(
        replicas[index % 2]!.url,
        sources[index % sources.length]!.apiKey,
        { email: uniqueEmail('burst'), first_name: `Burst ${index}` },
        15_000,
      )
      answered++
      // Mid-burst: the victim has requests in flight (40 are in flight at any time).
      if (answered === 150) {
        killedAfter = answered
        victim.process.kill('SIGKILL')
      }
      return sent
    })
    const results = await pool(tasks, 40)
    await victim.kill()
    expect(killedAfter).toBe(150)
    expect(victim.process.signalCode).toBe('SIGKILL')

    const confirmed = results.filter((result) => result.status === 200)
    const refusedByDeadReplica = results.filter((result) => result.status === 0)
    // The survivor answered all of its 250; the victim part of its 250 before it died.
    expect(confirmed.length).toBeGreaterThanOrEqual(250)
    expect(refusedByDeadReplica.length).toBeGreaterThan(0)
    // Nothing but 200s and dropped connections: no 5xx from the survivor.
    expect(results.filter((result) => result.status !== 200 && result.status !== 0)).toEqual([])
    for (const result of confirmed) expect(result.body?.status).toBe('created')

    // Restart the killed replica on its port; it comes back and serves.
    const restarted = await spawnReplica({ env, port: victim.port })
    const after = await postLead(restarted.url, sources[0]!.apiKey, { email: uniqueEmail('after') })
    expect(after.status).toBe(200)

    const leadIds = confirmed.map((result) => String(result.body?.lead_id))
    const rows = await database.sql<{ id: string }[]>`select id from leads where id = any(${leadIds}::uuid[])`
    const stored = new Set(rows.map((row) => row.id))
    expect(leadIds.filter((id) => !stored.has(id))).toEqual([])
    // Each confirmed lead also has its delivery-log entry (same transaction).
    const [logged] = await database.sql<{ count: number }[]>`
      select count(*)::int as count from delivery_logs where lead_id = any(${leadIds}::uuid[])`
    expect(logged?.count).toBe(leadIds.length)
  }, 120_000)
})
