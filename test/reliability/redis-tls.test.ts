import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  cleanupAll,
  createTestDatabase,
  makeTestCertificates,
  opensslAvailable,
  type RedisServer,
  type Replica,
  redisServer,
  redisServerAvailable,
  seedThroughApi,
  spawnReplica,
  type TestCertificates,
  type TestDatabase,
  waitUntil,
} from './support'

/**
 * A Redis that speaks TLS only (rediss://), with a certificate of a test authority the system does
 * not trust (names: localhost, 127.0.0.1, ::1; not 127.0.0.2), for both clients (REDIS_DRIVER).
 * With REDIS_TLS_CA_FILE naming that authority the replica's limiter is up and writes its counts
 * there; without it, or on an address the certificate does not name, the limiter stays degraded
 * (ingestion unaffected) and ioredis' log line says why. Before REDIS_TLS_CA_FILE, such a Redis
 * could not be used at all, and the line said "connection closed".
 */
describe.skipIf(!process.env.DATABASE_URL || !redisServerAvailable() || !opensslAvailable())(
  'Redis over TLS with a private certificate authority',
  () => {
    let certificates: TestCertificates
    let redis: RedisServer
    let database: TestDatabase

    beforeAll(async () => {
      certificates = makeTestCertificates()
      redis = redisServer(undefined, { tls: { certFile: certificates.cert, keyFile: certificates.key } })
      await redis.start()
      database = await createTestDatabase()
    }, 60_000)

    afterAll(async () => {
      await database?.drop()
      await cleanupAll()
    })

    /** The keys under `prefix` in the TLS Redis (read over TLS with the authority). */
    const redisKeys = (prefix: string) => {
      const result = Bun.spawnSync([
        'redis-cli',
        '--tls',
        '--cacert',
        certificates.ca,
        '-h',
        'localhost',
        '-p',
        String(redis.port),
        '--scan',
        '--pattern',
        `${prefix}*`,
      ])
      return result.stdout.toString().split('\n').filter(Boolean)
    }

    async function limiterOf(replica: Replica): Promise<{ kind: string; status: string }> {
      const response = await fetch(`${replica.url}/readyz`)
      expect(response.status).toBe(200)
      return ((await response.json()) as { rate_limiter: { kind: string; status: string } }).rate_limiter
    }

    /** A sign-up: a management route the limiter counts (in Redis when it is up). */
    const signUp = (replica: Replica) => seedThroughApi(replica.url, 0)

    for (const driver of ['ioredis', 'bun'] as const) {
      test(`${driver}: with REDIS_TLS_CA_FILE the limiter is up and counts in that Redis`, async () => {
        // a prefix of this replica's own: what it counts is told apart from any other run's
        const prefix = `rl:tls-${driver}-${crypto.randomUUID()}:`
        const replica = await spawnReplica({
          env: {
            DATABASE_URL: database.url,
            REDIS_URL: redis.url,
            REDIS_DRIVER: driver,
            REDIS_TLS_CA_FILE: certificates.ca,
            REDIS_KEY_PREFIX: prefix,
          },
        })
        try {
          await waitUntil(async () => (await limiterOf(replica)).status === 'up', 10_000, 'the limiter up')
          expect(await limiterOf(replica)).toEqual(expect.objectContaining({ kind: 'redis', status: 'up' }))
          await signUp(replica)
          expect(redisKeys(prefix).length).toBeGreaterThan(0)
        } finally {
          expect(await replica.stop()).toBe(0)
        }
      }, 60_000)

      const refused: Array<[string, Record<string, string>, RegExp | null]> = [
        [
          'no REDIS_TLS_CA_FILE (an authority the system does not trust)',
          {},
          /SELF_SIGNED|UNABLE_TO|self.signed|unable to (get|verify)/i,
        ],
        [
          'another authority',
          { REDIS_TLS_CA_FILE: 'other' },
          /SELF_SIGNED|UNABLE_TO|self.signed|unable to (get|verify)/i,
        ],
        [
          'an address the certificate does not name',
          { REDIS_TLS_CA_FILE: 'ca', HOST_127_0_0_2: '1' },
          /ERR_TLS_CERT_ALTNAME_INVALID/,
        ],
      ]
      test.each(refused)(
        `${driver}: %s: the limiter stays degraded, ingestion unaffected, the log says why`,
        async (_, variant, reason) => {
          const url = variant.HOST_127_0_0_2 ? `rediss://127.0.0.2:${redis.port}` : redis.url
          const ca =
            variant.REDIS_TLS_CA_FILE === 'other'
              ? certificates.otherCa
              : variant.REDIS_TLS_CA_FILE === 'ca'
                ? certificates.ca
                : undefined
          const replica = await spawnReplica({
            env: { DATABASE_URL: database.url, REDIS_URL: url, REDIS_DRIVER: driver, REDIS_TLS_CA_FILE: ca },
          })
          try {
            // the first attempt has failed by now (connect timeout 1 s)
            await Bun.sleep(1500)
            expect(await limiterOf(replica)).toEqual(
              expect.objectContaining({ kind: 'redis', status: 'degraded' }),
            )
            await signUp(replica)
            // Bun's client closes without the handshake's reason ("Connection closed"); ioredis gives it.
            if (driver === 'ioredis') {
              await waitUntil(() => reason!.test(replica.output()), 5000, 'the reason in the log')
            }
            expect(replica.output()).toContain('redis unreachable or slow')
          } finally {
            expect(await replica.stop()).toBe(0)
          }
        },
        60_000,
      )
    }

    test('REDIS_TLS_CA_FILE with a plain redis:// URL, or a file that is not there: refused at start', async () => {
      for (const [env, message] of [
        [
          { REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_TLS_CA_FILE: certificates.ca },
          /REDIS_TLS_CA_FILE: needs a rediss:\/\/ REDIS_URL/,
        ],
        [
          { REDIS_URL: redis.url, REDIS_TLS_CA_FILE: `${certificates.ca}.missing` },
          /REDIS_TLS_CA_FILE: ".*" cannot be read \(ENOENT\)/,
        ],
        [
          { REDIS_URL: redis.url, REDIS_TLS_CA_FILE: certificates.key },
          /REDIS_TLS_CA_FILE: ".*" holds no PEM certificate/,
        ],
      ] as const) {
        const replica = await spawnReplica({ env: { DATABASE_URL: database.url, ...env }, waitReady: false })
        expect(await replica.process.exited).toBe(1)
        expect(replica.output()).toMatch(message)
      }
    }, 60_000)
  },
)
