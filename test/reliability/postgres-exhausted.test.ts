import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { createOrganization, createSession, createUser } from '../helpers/factories'
import {
  cleanupAll,
  createPostgresCluster,
  type PostgresCluster,
  postgresBinDir,
  type Replica,
  seedContext,
  spawnReplica,
  waitUntil,
} from './support'

const MAX_CONNECTIONS = 12
const POOL_SIZE = 6

interface Answer {
  status: number
  body: Record<string, unknown> | null
  retryAfter: string | null
  failed?: string
}

async function get(url: string, token?: string): Promise<Answer> {
  try {
    const response = await fetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(15_000),
    })
    const text = await response.text()
    let body: Record<string, unknown> | null = null
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: response.status, body, retryAfter: response.headers.get('retry-after') }
  } catch (error) {
    return { status: 0, body: null, retryAfter: null, failed: String(error) }
  }
}

/**
 * A PostgreSQL cluster of this file's own with max_connections = 12, two replicas whose pools
 * (2 × (6 + 1 listener) = 14) outgrow it, and the slots they have not opened yet taken by the test:
 * every "server cannot serve now" answer is 503 service_unavailable with Retry-After (never 500),
 * /readyz says 503 while it lasts, a replica started meanwhile exits 1 naming SQLSTATE 53300, and
 * everything recovers by itself once connections are free again.
 */
describe.skipIf(!process.env.DATABASE_URL || !postgresBinDir())('PostgreSQL at max_connections', () => {
  let cluster: PostgresCluster
  let replicas: Replica[]
  let token: string

  beforeAll(async () => {
    cluster = await createPostgresCluster(undefined, { maxConnections: MAX_CONNECTIONS })
    await cluster.start()
    const ctx = await seedContext(cluster.url)
    const organization = await createOrganization(ctx)
    const owner = await createUser(ctx, organization.id, { role: 'owner' })
    token = await createSession(ctx, owner.id)
    await ctx.close()
    // postgres.js for every statement: the management reads below must want more connections than
    // the replica has open. With DATABASE_DRIVER=bun-sql (the default) postgres.js holds a third of the
    // pool (2 of 6), which start-up work may have opened already, and no read is ever refused.
    const env = {
      DATABASE_URL: cluster.url,
      DATABASE_POOL_SIZE: String(POOL_SIZE),
      DATABASE_DRIVER: 'postgres-js',
      SHUTDOWN_DELAY_MS: '0',
    }
    replicas = await Promise.all([spawnReplica({ env }), spawnReplica({ env })])
  }, 120_000)

  afterAll(cleanupAll, 60_000)

  test('503 + Retry-After and /readyz 503 while exhausted, never 500; start-up fails with 53300; recovery by itself', async () => {
    // Take every slot left: the replicas cannot open another connection from here on.
    const hog = postgres(cluster.url, { max: MAX_CONNECTIONS, onnotice: () => {}, connect_timeout: 5 })
    const held: Array<{ release(): void }> = []
    let refusal: unknown
    for (let index = 0; index < MAX_CONNECTIONS; index++) {
      try {
        held.push(await hog.reserve())
      } catch (error) {
        refusal = error
        break
      }
    }
    expect((refusal as { code?: string }).code).toBe('53300')

    try {
      // 40 concurrent management reads per replica: each replica wants more connections than it has.
      const answers = (
        await Promise.all(
          replicas.flatMap((replica) =>
            Array.from({ length: 40 }, () => get(`${replica.url}/api/webhook/sources`, token)),
          ),
        )
      ).flat()
      const statuses = answers.map((answer) => answer.status)
      expect(answers.filter((answer) => answer.failed)).toEqual([])
      expect(statuses.filter((status) => status !== 200 && status !== 503)).toEqual([])
      const refused = answers.filter((answer) => answer.status === 503)
      expect(refused.length).toBeGreaterThan(0)
      for (const answer of refused) {
        expect(answer.retryAfter).toBe('5')
        expect(answer.body).toMatchObject({ error: 'service_unavailable', request_id: expect.any(String) })
      }
      // A replica that had to refuse says so to the balancer.
      const refusingReplicas = replicas.filter((_, index) =>
        answers.slice(index * 40, index * 40 + 40).some((answer) => answer.status === 503),
      )
      for (const replica of refusingReplicas) {
        const readiness = await get(`${replica.url}/readyz`)
        expect(readiness.status).toBe(503)
        expect(readiness.body).toMatchObject({ status: 'not_ready', database: { status: 'down' } })
      }

      // A replica started now cannot run its migrations: exit 1 with the cause, never the values.
      const late = await spawnReplica({
        env: { DATABASE_URL: cluster.url, DATABASE_POOL_SIZE: '2' },
        waitReady: false,
      })
      expect(await late.process.exited).toBe(1)
      const output = late.output()
      expect(output).toContain('migrations failed')
      expect(output).toContain('"sqlstate":"53300"')
      expect(output).toMatch(/too many clients/)
      expect(output).not.toContain('Failed query')
      expect(output).not.toContain('params:')
    } finally {
      for (const connection of held) connection.release()
      await hog.end({ timeout: 5 })
    }

    // Recovery, without a restart: ready again and serving.
    for (const replica of replicas) {
      await waitUntil(
        async () => (await get(`${replica.url}/readyz`)).status === 200,
        15_000,
        `${replica.url} ready`,
      )
    }
    const after = await Promise.all(
      replicas.flatMap((replica) =>
        Array.from({ length: 10 }, () => get(`${replica.url}/api/webhook/sources`, token)),
      ),
    )
    expect(after.map((answer) => answer.status)).toEqual(after.map(() => 200))
  }, 120_000)
})
