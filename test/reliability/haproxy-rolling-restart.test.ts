import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { inArray } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { leads } from '../../src/db/schema'
import { createOrganization, createSource } from '../helpers/factories'
import {
  cleanupAll,
  createTestDatabase,
  freePort,
  type Haproxy,
  haproxyAvailable,
  openLoop,
  postLead,
  type RedisServer,
  type Replica,
  redisServer,
  redisServerAvailable,
  type Sent,
  seedContext,
  spawnReplica,
  startHaproxy,
  uniqueEmail,
  waitUntil,
} from './support'

const RATE = 150
/** The balancer's check: every 1 s, down after 2 failures, up after 2 successes. */
const CHECK = 'inter 1s fall 2 rise 2'
/** Above inter × fall (2 s) plus one interval of phase: the balancer has let go before the port closes. */
const SHUTDOWN_DELAY_MS = 3500

/**
 * The deployment of docs/operations.md, for real: HAProxy 2.6 (Debian's) with the stock
 * `option httpchk GET /readyz` (HTTP/1.0, relative request line, no Host), retries and redispatch
 * OFF, two replicas on one PostgreSQL and one Redis, a steady 150 requests/s open-loop load of
 * leads, and a rolling restart of both replicas (SIGTERM, wait for exit, start again on the same
 * port). No request may fail, every acknowledged lead is stored exactly once, and no replica is
 * ever marked down by its probes being rate-limited, even with the anonymous bucket of the
 * balancer's IP exhausted.
 */
describe.skipIf(!process.env.DATABASE_URL || !haproxyAvailable() || !redisServerAvailable())(
  'HAProxy in front of two replicas: rolling restart under load',
  () => {
    let ctx: AppContext
    let apiKeys: string[]
    let redis: RedisServer
    let haproxy: Haproxy
    const ports = [freePort(), freePort()]
    let env: Record<string, string | undefined>
    const replicas: Replica[] = []

    beforeAll(async () => {
      const database = await createTestDatabase()
      ctx = await seedContext(database.url)
      const organization = await createOrganization(ctx)
      // 120 sources: about 40 s at 150/s is 50 requests per source, under the 60/min per-key limit.
      apiKeys = []
      for (let index = 0; index < 120; index++)
        apiKeys.push((await createSource(ctx, organization.id)).apiKey)
      // A Redis of its own: exhausting the loopback IP's anonymous bucket must not reach other suites.
      redis = redisServer()
      await redis.start()
      env = {
        DATABASE_URL: database.url,
        REDIS_URL: redis.url,
        DATABASE_POOL_SIZE: '4',
        SHUTDOWN_DELAY_MS: String(SHUTDOWN_DELAY_MS),
      }
      replicas.push(...(await Promise.all(ports.map((port) => spawnReplica({ env, port })))))
      haproxy = await startHaproxy(
        (port, statsPort) => `
global
  maxconn 2000

defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  # Off on purpose: a request sent to a closed port would be a client error, not hidden by a retry.
  retries 0
  no option redispatch

frontend leads
  bind 127.0.0.1:${port}
  default_backend replicas

backend replicas
  balance roundrobin
  option httpchk GET /readyz
  server r0 127.0.0.1:${ports[0]} check ${CHECK}
  server r1 127.0.0.1:${ports[1]} check ${CHECK}

listen stats
  bind 127.0.0.1:${statsPort}
  stats enable
  stats uri /stats
`,
      )
      await waitUntil(
        async () => Object.values(await haproxy.servers()).every((server) => server.status === 'UP'),
        15_000,
        'both replicas UP in haproxy',
      )
    }, 180_000)

    afterAll(cleanupAll, 60_000)

    test('0 failed requests, every acknowledged lead stored exactly once, no replica marked down by limited probes', async () => {
      const sent: Array<Sent & { email: string }> = []
      let stopLoad = false
      const load = (async () => {
        for (let round = 0; !stopLoad; round++) {
          const results = await openLoop(RATE, 1000, async (index) => {
            const email = uniqueEmail('rolling')
            const key = apiKeys[(round * RATE + index) % apiKeys.length]!
            return { ...(await postLead(haproxy.url, key, { email }, 15_000)), email }
          })
          sent.push(...results)
        }
      })()

      // 1. Probes are never limited: exhaust the anonymous bucket of 127.0.0.1 (the balancer's
      //    address) on both replicas, and send 110 checks of HAProxy's own form besides.
      await Bun.sleep(2000)
      for (const replica of replicas) {
        const statuses: number[] = []
        for (let index = 0; index < 110; index++) {
          statuses.push((await fetch(`${replica.url}/api/auth/me`)).status)
        }
        expect(statuses.at(-1)).toBe(429)
        for (let index = 0; index < 110; index++) {
          expect(await rawStatus(replica.port, 'GET /readyz HTTP/1.0\r\n\r\n')).toBe(200)
        }
      }
      // Three check intervals later, both still UP and never went down.
      await Bun.sleep(3500)
      for (const [name, server] of Object.entries(await haproxy.servers())) {
        expect({ name, status: server.status, chkdown: server.chkdown }).toEqual({
          name,
          status: 'UP',
          chkdown: '0',
        })
      }

      // 2. Rolling restart: SIGTERM, wait for the exit, start again on the same port, wait until
      //    the balancer has it UP, then the next one.
      for (let index = 0; index < replicas.length; index++) {
        const name = `r${index}`
        expect(await replicas[index]!.stop()).toBe(0)
        expect((await haproxy.servers())[name]!.status).toStartWith('DOWN')
        replicas[index] = await spawnReplica({ env, port: ports[index] })
        await waitUntil(
          async () => (await haproxy.servers())[name]!.status === 'UP',
          15_000,
          `${name} UP again`,
        )
      }
      await Bun.sleep(2000)
      stopLoad = true
      await load

      const failed = sent.filter((one) => one.status !== 200)
      const seconds = sent.length / RATE
      console.log(
        `rolling restart behind haproxy: ${sent.length} requests over ~${Math.round(seconds)} s, ${failed.length} failed`,
      )
      expect(failed.map((one) => one.failed ?? `${one.status} ${JSON.stringify(one.body)}`)).toEqual([])
      // Each replica went down exactly once: for its restart, never because of its probes.
      for (const [name, server] of Object.entries(await haproxy.servers())) {
        expect({ name, status: server.status, chkdown: server.chkdown }).toEqual({
          name,
          status: 'UP',
          chkdown: '1',
        })
      }

      // Every acknowledged lead is stored exactly once, under the id it was acknowledged with.
      const acknowledged = sent.filter((one) => one.body?.status === 'created')
      expect(acknowledged).toHaveLength(sent.length)
      const rows: Array<{ id: string; email: string | null }> = []
      const emails = acknowledged.map((one) => one.email)
      for (let start = 0; start < emails.length; start += 1000) {
        rows.push(
          ...(await ctx.db
            .select({ id: leads.id, email: leads.emailNormalized })
            .from(leads)
            .where(inArray(leads.emailNormalized, emails.slice(start, start + 1000)))),
        )
      }
      expect(rows).toHaveLength(acknowledged.length)
      const stored = new Map(rows.map((row) => [row.email, row.id]))
      expect(stored.size).toBe(acknowledged.length)
      for (const one of acknowledged) expect(stored.get(one.email)).toBe(one.body!.lead_id as string)
    }, 180_000)
  },
)

/** The status code of one request sent on a new socket as written. */
function rawStatus(port: number, head: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = ''
    const socket = connect(port, '127.0.0.1', () => socket.write(head))
    socket.setTimeout(5000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1')
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(text.split(' ')[1])))
  })
}
