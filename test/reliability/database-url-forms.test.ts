import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import {
  cleanupAll,
  createPostgresCluster,
  makeTestCertificates,
  opensslAvailable,
  type PostgresCluster,
  postgresBinDir,
  type Replica,
  seedThroughApi,
  spawnReplica,
  type TestCertificates,
  uniqueEmail,
  waitUntil,
} from './support'

/**
 * Every DATABASE_URL form a managed database hands out, against a server of this file's own that
 * asks for a password (scram-sha-256, one holding every character a URL reserves), offers TLS with
 * a certificate of a test authority (names: localhost, 127.0.0.1, ::1; not 127.0.0.2) and listens
 * on 127.0.0.1, 127.0.0.2, ::1 and a Unix-domain socket. For each accepted form a replica starts,
 * signs up (a postgres.js transaction), stores a lead (the Bun.sql hot statement), and every one of
 * its connections is as the URL asked (TLS or not, over the socket or not); for each refused form
 * the replica stops at start with a message that names the reason. No output of any replica holds
 * the password. Before the service read the URL itself (src/db/database-url.ts), the IPv6, socket
 * and certificate-authority forms failed at start, several hosts failed with "Invalid URL".
 */
const PASSWORD = 'p@ss:w/rd#?%&= +é'
const ENCODED = encodeURIComponent(PASSWORD)
const DATABASE = 'lc_url_forms'
const available = Boolean(postgresBinDir()) && opensslAvailable()

describe.skipIf(!available)('DATABASE_URL forms against a server of its own', () => {
  let certificates: TestCertificates
  let cluster: PostgresCluster & { socketDirectory: string }
  let admin: postgres.Sql
  const outputs: string[] = []

  beforeAll(async () => {
    certificates = makeTestCertificates()
    cluster = await createPostgresCluster(undefined, {
      password: PASSWORD,
      tls: { certFile: certificates.cert, keyFile: certificates.key },
      listen: ['127.0.0.1', '127.0.0.2', '::1'],
    })
    await cluster.start()
    admin = postgres({
      host: '127.0.0.1',
      port: cluster.port,
      user: 'postgres',
      pass: PASSWORD,
      database: 'postgres',
      max: 1,
      onnotice: () => {},
    })
    await admin.unsafe(`create database ${DATABASE}`)
  }, 120_000)

  afterAll(async () => {
    await admin?.end({ timeout: 5 })
    await cleanupAll()
  })

  const url = (host: string, query = '') =>
    `postgres://postgres:${ENCODED}@${host}:${cluster.port}/${DATABASE}${query ? `?${query}` : ''}`

  /** The replica's own connections: their TLS and whether they came over TCP. */
  async function connectionsOf(): Promise<Array<{ ssl: boolean; tcp: boolean }>> {
    const rows = await admin.unsafe<Array<{ ssl: boolean; tcp: boolean }>>(
      `select s.ssl, a.client_port <> -1 and a.client_port is not null as tcp
       from pg_stat_activity a join pg_stat_ssl s using (pid)
       where a.datname = '${DATABASE}' and a.application_name like 'lead-capture%'`,
    )
    return [...rows]
  }

  async function serves(replica: Replica): Promise<void> {
    // a sign-up (a postgres.js transaction) and a source, each answered 201
    const {
      apiKeys: [apiKey],
    } = await seedThroughApi(replica.url, 1)
    const lead = await fetch(`${replica.url}/api/webhook/lead/${apiKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: uniqueEmail('lead'), first_name: 'Forms' }),
    })
    expect(lead.status).toBe(200)
    expect(((await lead.json()) as { status: string }).status).toBe('created')
  }

  /** A form, what every connection must be, and the variables set beside DATABASE_URL. */
  const accepted: Array<[string, () => string, { ssl: boolean; tcp: boolean }, Record<string, string>?]> = [
    [
      'an IPv4 address, a password with every reserved character, no sslmode',
      () => url('127.0.0.1'),
      { ssl: false, tcp: true },
    ],
    [
      'an IPv6 address in brackets, sslmode=require',
      () => url('[::1]', 'sslmode=require'),
      { ssl: true, tcp: true },
    ],
    [
      'a socket directory as ?host',
      () =>
        `postgres://postgres:${ENCODED}@/${DATABASE}?host=${encodeURIComponent(cluster.socketDirectory)}&port=${cluster.port}`,
      { ssl: false, tcp: false },
    ],
    [
      'a socket directory percent-encoded as the host',
      () => url(encodeURIComponent(cluster.socketDirectory)),
      { ssl: false, tcp: false },
    ],
    [
      'verify-full with the authority, by name',
      () => url('localhost', `sslmode=verify-full&sslrootcert=${certificates.ca}`),
      { ssl: true, tcp: true },
    ],
    [
      'verify-full with the authority, by IPv6 address',
      () => url('[::1]', `sslmode=verify-full&sslrootcert=${certificates.ca}`),
      { ssl: true, tcp: true },
    ],
    [
      'verify-ca with the authority, an address the certificate does not name',
      () => url('127.0.0.2', `sslmode=verify-ca&sslrootcert=${certificates.ca}`),
      { ssl: true, tcp: true },
    ],
    [
      'require with the authority (verify-ca, as libpq)',
      () => url('127.0.0.2', `sslmode=require&sslrootcert=${certificates.ca}`),
      { ssl: true, tcp: true },
    ],
    [
      'options and connect_timeout',
      () => url('127.0.0.1', 'options=-c%20work_mem%3D8MB&connect_timeout=10'),
      { ssl: false, tcp: true },
    ],
    [
      // A secret store's usual split (Kubernetes): the password in PGPASSWORD, the URL without one.
      'no password in the URL, PGPASSWORD set (libpq’s fallback)',
      () => `postgres://postgres@127.0.0.1:${cluster.port}/${DATABASE}`,
      { ssl: false, tcp: true },
      { PGPASSWORD: PASSWORD },
    ],
  ]

  test.each(accepted)(
    '%s: starts, signs up, stores a lead, every connection as asked',
    async (_, form, expected, variables = {}) => {
      const replica = await spawnReplica({
        env: { DATABASE_URL: form(), DATABASE_POOL_SIZE: '4', ...variables },
      })
      try {
        await serves(replica)
        const connections = await connectionsOf()
        // the hot statements' pool and postgres.js' (and its listener)
        expect(connections.length).toBeGreaterThanOrEqual(3)
        for (const connection of connections) expect(connection).toEqual(expected)
      } finally {
        expect(await replica.stop()).toBe(0)
        outputs.push(replica.output())
      }
      await waitUntil(
        async () => (await connectionsOf()).length === 0,
        10_000,
        'the replica’s connections closed',
      )
    },
    60_000,
  )

  const refused: Array<[string, () => string, RegExp]> = [
    [
      'verify-full, an address the certificate does not name',
      () => url('127.0.0.2', `sslmode=verify-full&sslrootcert=${certificates.ca}`),
      /altname|does not match|hostname/i,
    ],
    [
      'verify-ca, another authority',
      () => url('127.0.0.1', `sslmode=verify-ca&sslrootcert=${certificates.otherCa}`),
      /certificate/i,
    ],
    [
      'a wrong password',
      () => `postgres://postgres:not-${ENCODED}@127.0.0.1:${cluster.port}/${DATABASE}`,
      /password authentication failed/,
    ],
    [
      'no password in the URL nor in PGPASSWORD',
      () => `postgres://postgres@127.0.0.1:${cluster.port}/${DATABASE}`,
      /password/i,
    ],
    [
      'several hosts',
      () => `postgres://postgres:${ENCODED}@127.0.0.2:${cluster.port},127.0.0.1:${cluster.port}/${DATABASE}`,
      /DATABASE_URL: several hosts are not supported/,
    ],
    [
      'a parameter the server would refuse as a setting',
      () => url('127.0.0.1', 'schema=public'),
      /DATABASE_URL: the parameter "schema" is not supported/,
    ],
  ]

  test.each(refused)(
    '%s: stops at start, says why',
    async (_, form, reason) => {
      const replica = await spawnReplica({ env: { DATABASE_URL: form() }, waitReady: false })
      const code = await Promise.race([replica.process.exited, Bun.sleep(40_000).then(() => 'still running')])
      outputs.push(replica.output())
      expect(code).toBe(1)
      expect(replica.output()).toMatch(reason)
    },
    60_000,
  )

  test('no replica wrote the password, plain or encoded', () => {
    expect(outputs.length).toBe(accepted.length + refused.length)
    for (const output of outputs) {
      expect(output).not.toContain(PASSWORD)
      expect(output).not.toContain(ENCODED)
    }
  })
})
