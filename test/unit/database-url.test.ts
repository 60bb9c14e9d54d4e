import { describe, expect, test } from 'bun:test'
import {
  bunSqlConnection,
  DatabaseUrlError,
  describeTarget,
  parseDatabaseUrl,
  postgresJsConnection,
} from '../../src/db/database-url'

/**
 * The service's reading of DATABASE_URL (src/db/database-url.ts): every form libpq's URI takes that
 * the service supports, read to the same target, and every form it does not, refused with a message
 * that never holds the password. The reliability test (test/reliability/database-url-forms.test.ts)
 * starts the service on each accepted form against a server of its own.
 */
const PASSWORD = 'p@ss:w/rd#?%&= +é'
const encoded = encodeURIComponent(PASSWORD)
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'
const files: Record<string, string> = { '/etc/ca.pem': PEM, '/etc/not-pem.txt': 'hello' }
const readFile = (path: string) => {
  const text = files[path]
  if (text === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' })
  return text
}
const parse = (url: string) => parseDatabaseUrl(url, readFile)

describe('DATABASE_URL: accepted forms', () => {
  const base = {
    user: 'app',
    password: PASSWORD,
    database: 'leads',
    sslMode: 'disable',
    rootCertificates: null,
    options: null,
  }
  test.each([
    [
      'a host name',
      `postgres://app:${encoded}@db.internal:6543/leads`,
      { host: 'db.internal', port: 6543, socketPath: null },
    ],
    [
      'postgresql:// and the default port',
      `postgresql://app:${encoded}@db.internal/leads`,
      { host: 'db.internal', port: 5432, socketPath: null },
    ],
    [
      'an IPv4 address',
      `postgres://app:${encoded}@10.0.0.5:5432/leads`,
      { host: '10.0.0.5', port: 5432, socketPath: null },
    ],
    [
      'an IPv6 address',
      `postgres://app:${encoded}@[fd00::5]:5433/leads`,
      { host: 'fd00::5', port: 5433, socketPath: null },
    ],
    [
      'an IPv6 address, no port',
      `postgres://app:${encoded}@[::1]/leads`,
      { host: '::1', port: 5432, socketPath: null },
    ],
    [
      'a socket directory as ?host',
      `postgres://app:${encoded}@/leads?host=/cloudsql/p:r:i`,
      { host: null, port: 5432, socketPath: '/cloudsql/p:r:i/.s.PGSQL.5432' },
    ],
    [
      'a socket directory with a trailing slash',
      `postgres://app:${encoded}@/leads?host=/var/run/postgresql/`,
      { host: null, port: 5432, socketPath: '/var/run/postgresql/.s.PGSQL.5432' },
    ],
    [
      'a socket directory percent-encoded as the host',
      `postgres://app:${encoded}@%2Fvar%2Frun%2Fpostgresql:5434/leads`,
      { host: null, port: 5434, socketPath: '/var/run/postgresql/.s.PGSQL.5434' },
    ],
    [
      'host, port, user, password and dbname as parameters',
      `postgres:///?host=db.internal&port=6000&user=app&password=${encoded}&dbname=leads`,
      { host: 'db.internal', port: 6000, socketPath: null },
    ],
    [
      'an unencoded @ in the password (the last @ ends it)',
      `postgres://app:p@ss@db.internal/leads`,
      { host: 'db.internal', port: 5432, password: 'p@ss' },
    ],
    [
      'a percent-encoded database name',
      `postgres://app:${encoded}@db.internal/lead%20s`,
      { host: 'db.internal', database: 'lead s' },
    ],
  ] as const)('%s', (_, url, expected) => {
    expect(parse(url)).toMatchObject({ ...base, ...expected })
  })

  test.each([
    ['disable', 'disable'],
    ['allow', 'prefer'],
    ['prefer', 'prefer'],
    ['require', 'require'],
    ['verify-full', 'verify-full'],
  ] as const)('sslmode=%s is %s', (given, mode) => {
    expect(parse(`postgres://app@db.internal/leads?sslmode=${given}`).sslMode).toBe(mode)
  })

  test('no sslmode: a plain connection, as before the service read the URL itself', () => {
    expect(parse('postgres://app@db.internal/leads').sslMode).toBe('disable')
  })

  test('sslrootcert: read at start; require with it verifies the chain (libpq); system verifies the host', () => {
    expect(parse('postgres://app@db.internal/leads?sslmode=verify-ca&sslrootcert=/etc/ca.pem')).toMatchObject(
      {
        sslMode: 'verify-ca',
        rootCertificates: PEM,
      },
    )
    expect(parse('postgres://app@db.internal/leads?sslmode=require&sslrootcert=/etc/ca.pem').sslMode).toBe(
      'verify-ca',
    )
    expect(
      parse('postgres://app@db.internal/leads?sslmode=verify-full&sslrootcert=/etc/ca.pem').sslMode,
    ).toBe('verify-full')
    expect(parse('postgres://app@db.internal/leads?sslmode=require&sslrootcert=system')).toMatchObject({
      sslMode: 'verify-full',
      rootCertificates: null,
    })
  })

  test('channel_binding prefer or disable is taken (postgres.js cannot bind; prefer falls back)', () => {
    for (const value of ['prefer', 'disable']) {
      expect(parse(`postgres://app@db.internal/leads?sslmode=require&channel_binding=${value}`).sslMode).toBe(
        'require',
      )
    }
  })

  test('options, connect_timeout and target_session_attrs are taken', () => {
    expect(
      parse(
        'postgres://app@db.internal/leads?options=-c%20statement_timeout%3D5000&connect_timeout=10&target_session_attrs=read-write',
      ).options,
    ).toBe('-c statement_timeout=5000')
  })

  test('both clients get the same host, port, socket, credentials, database and TLS', () => {
    for (const url of [
      `postgres://app:${encoded}@[fd00::5]:5433/leads?sslmode=require`,
      `postgres://app:${encoded}@/leads?host=/cloudsql/p:r:i`,
      `postgres://app:${encoded}@db.internal/leads?sslmode=verify-full&sslrootcert=/etc/ca.pem`,
    ]) {
      const target = parse(url)
      const postgresJs = postgresJsConnection(target)
      const bunSql = bunSqlConnection(target)
      expect(postgresJs.port).toBe(target.port)
      expect(bunSql.port).toBe(target.port)
      expect(postgresJs.path ?? null).toBe(target.socketPath)
      expect((bunSql.path as string | undefined) ?? null).toBe(target.socketPath)
      if (target.host) {
        expect(postgresJs.host).toBe(target.host)
        expect(bunSql.hostname).toBe(target.host)
      }
      expect([postgresJs.user, postgresJs.pass, postgresJs.database]).toEqual([
        target.user,
        PASSWORD,
        'leads',
      ])
      expect([bunSql.username, bunSql.password, bunSql.database]).toEqual([target.user, PASSWORD, 'leads'])
      expect(postgresJs.ssl).toEqual(bunSql.tls as never)
    }
  })

  test('the location in logs names host, port and database, never the user information', () => {
    expect(describeTarget(parse(`postgres://app:${encoded}@[fd00::5]:5433/leads`))).toBe(
      'postgres://[fd00::5]:5433/leads',
    )
    expect(describeTarget(parse(`postgres://app:${encoded}@/leads?host=/cloudsql/p:r:i`))).toBe(
      'postgres://socket /cloudsql/p:r:i/.s.PGSQL.5432/leads',
    )
  })
})

describe('DATABASE_URL: refused forms, each with a message naming what, never the password', () => {
  test.each([
    ['several hosts', `postgres://app:${encoded}@db1.internal:5432,db2.internal:5432/leads`, /several hosts/],
    [
      'an unknown parameter (a client would send it as a server setting)',
      `postgres://app:${encoded}@db.internal/leads?schema=public`,
      /"schema" is not supported/,
    ],
    [
      'an application_name (the service names its connections)',
      `postgres://app:${encoded}@db.internal/leads?application_name=x`,
      /"application_name" is not supported/,
    ],
    [
      'a client certificate',
      `postgres://app:${encoded}@db.internal/leads?sslcert=/etc/c.pem`,
      /"sslcert" is not supported/,
    ],
    [
      "Neon's channel_binding=require (postgres.js cannot bind the channel)",
      `postgres://app:${encoded}@ep-x.neon.tech/leads?sslmode=require&channel_binding=require`,
      /channel_binding=require cannot be kept.*channel_binding=prefer/,
    ],
    ['an unknown sslmode', `postgres://app:${encoded}@db.internal/leads?sslmode=always`, /sslmode "always"/],
    [
      'verify-ca without a certificate authority',
      `postgres://app:${encoded}@db.internal/leads?sslmode=verify-ca`,
      /needs sslrootcert/,
    ],
    [
      'an sslrootcert that cannot be read',
      `postgres://app:${encoded}@db.internal/leads?sslmode=verify-full&sslrootcert=/etc/none.pem`,
      /cannot be read \(ENOENT\)/,
    ],
    [
      'an sslrootcert with no certificate',
      `postgres://app:${encoded}@db.internal/leads?sslmode=verify-full&sslrootcert=/etc/not-pem.txt`,
      /no PEM certificate/,
    ],
    [
      'TLS asked for over a socket',
      `postgres://app:${encoded}@/leads?host=/cloudsql/x&sslmode=require`,
      /Unix-domain socket/,
    ],
    ['an IPv6 address without brackets', `postgres://app:${encoded}@fd00::5/leads`, /in brackets/],
    [
      'brackets around something else',
      `postgres://app:${encoded}@[db.internal]/leads`,
      /not an IPv6 address/,
    ],
    ['an unclosed bracket', `postgres://app:${encoded}@[fd00::5/leads`, /closing/],
    ['a port out of range', `postgres://app:${encoded}@db.internal:70000/leads`, /port/],
    ['a port that is not a number', `postgres://app:${encoded}@db.internal:pg/leads`, /port/],
    ['no host', `postgres://app:${encoded}@/leads`, /no host/],
    ['no user', 'postgres://db.internal/leads', /no user name/],
    ['no database', `postgres://app:${encoded}@db.internal`, /no database name/],
    [
      'a broken percent-encoding in the password',
      'postgres://app:%ZZsecret@db.internal/leads',
      /the password is not percent-encoded/,
    ],
    [
      'a parameter given twice',
      `postgres://app:${encoded}@db.internal/leads?sslmode=require&sslmode=disable`,
      /given twice/,
    ],
    ['a fragment', `postgres://app:${encoded}@db.internal/leads#x`, /fragment/],
    [
      'an unsupported target_session_attrs',
      `postgres://app:${encoded}@db.internal/leads?target_session_attrs=standby`,
      /target_session_attrs/,
    ],
    ['another scheme', `mysql://app:${encoded}@db.internal/leads`, /postgres:\/\//],
  ] as const)('%s', (_, url, message) => {
    let caught: unknown
    try {
      parse(url)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(DatabaseUrlError)
    expect((caught as Error).message).toMatch(message)
    for (const secret of [PASSWORD, encoded, 'secret'])
      expect((caught as Error).message).not.toContain(secret)
  })
})
