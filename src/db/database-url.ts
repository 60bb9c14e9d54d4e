import { isIP } from 'node:net'
import type { Options as PostgresJsOptions } from 'postgres'
import { readCertificateAuthorities } from '../lib/certificates'

/**
 * DATABASE_URL, read once by the service's own reader and handed to both clients as options.
 *
 * Why not the URL itself: postgres.js 3.4.9 and Bun.sql each read a URL their own way, and they
 * disagree on forms that managed databases hand out (measured 2026-11-28, test/reliability/database-url-forms.test.ts):
 * - an IPv6 address (`postgres://…@[fd00::5]:5432/db`): postgres.js looks up the host `[` and fails;
 * - a Unix-domain socket (`?host=/cloudsql/project:region:instance`, Cloud SQL on Cloud Run; or the
 *   directory percent-encoded as the host): postgres.js refuses the URL or looks the path up as a
 *   host name, Bun.sql connects;
 * - `sslrootcert`: Bun.sql verifies against it, postgres.js ignores it and fails every verified
 *   connection;
 * - several hosts (`h1,h2`): postgres.js tries them in turn, Bun.sql refuses the URL (`Invalid URL`);
 * - a parameter neither knows (`?schema=public`): both send it to the server as a setting, which
 *   refuses the connection, so the replica started and failed every statement.
 * So the service reads the URL (the libpq URI form, below), refuses at start what it does not
 * support with a message that names the part (never the password), and gives both clients the same
 * host, port, socket, credentials, database and TLS settings.
 */
export type SslMode = 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full'

export interface DatabaseTarget {
  /** A host name or IP address (an IPv6 address without its brackets); null for a Unix-domain socket. */
  host: string | null
  /** The socket file (`<directory>/.s.PGSQL.<port>`, as libpq names it), when host is null. */
  socketPath: string | null
  port: number
  user: string
  password: string
  database: string
  /**
   * libpq's modes. Without `sslmode` the connection is plain, as both clients did before (libpq's
   * own default is `prefer`). `allow` is read as `prefer`; `require` with `sslrootcert` is
   * `verify-ca`, as in libpq.
   */
  sslMode: SslMode
  /** The certificate authorities of `sslrootcert` (PEM), for verify-ca and verify-full. */
  rootCertificates: string | null
  /** libpq's `options` (`-c name=value …`): sent at connection start. */
  options: string | null
}

/** A DATABASE_URL the service cannot use; the message never holds the URL's user information. */
export class DatabaseUrlError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'DatabaseUrlError'
  }
}

/**
 * The query parameters the service reads. Any other is refused: sent on by a client it would be a
 * server setting, and the server refuses a connection naming one it does not know.
 */
const SUPPORTED_PARAMETERS = [
  'host',
  'port',
  'dbname',
  'user',
  'password',
  'sslmode',
  'sslrootcert',
  'options',
  'connect_timeout',
  'target_session_attrs',
  'channel_binding',
] as const

const SSL_MODES: Record<string, SslMode> = {
  disable: 'disable',
  allow: 'prefer',
  prefer: 'prefer',
  require: 'require',
  'verify-ca': 'verify-ca',
  'verify-full': 'verify-full',
}

/** libpq's port when the URL names none. */
const DEFAULT_PORT = 5432

/**
 * Reads `postgres[ql]://[user[:password]@][host][:port][/dbname][?param=value&…]` (libpq's URI
 * form; every part percent-decoded). The host may be a name, an IPv4 address, an IPv6 address in
 * brackets, or a socket directory (percent-encoded, or as `?host=/dir`). `readFile` reads
 * `sslrootcert` (a file the operator names; read once at start).
 */
export function parseDatabaseUrl(url: string, readFile?: (path: string) => string): DatabaseTarget {
  const match = /^postgres(?:ql)?:\/\/([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?(#.*)?$/.exec(url.trim())
  if (!match) throw new DatabaseUrlError('not a postgres:// or postgresql:// URL')
  const [, authority = '', path = '', query = '', fragment] = match
  if (fragment) throw new DatabaseUrlError('a URL fragment (#…) is not part of a connection URL')

  // The user information ends at the last `@`: a password's own `@` should be encoded, but an
  // unencoded one is read as libpq reads it.
  const at = authority.lastIndexOf('@')
  const userInfo = at >= 0 ? authority.slice(0, at) : null
  const hostPort = at >= 0 ? authority.slice(at + 1) : authority
  let user = ''
  let password = ''
  if (userInfo !== null) {
    const colon = userInfo.indexOf(':')
    user = decodePart(colon >= 0 ? userInfo.slice(0, colon) : userInfo, 'the user name')
    password = colon >= 0 ? decodePart(userInfo.slice(colon + 1), 'the password') : ''
  }

  if (hostPort.includes(',')) {
    throw new DatabaseUrlError(
      'several hosts are not supported: name one host (a DNS name or a proxy in front of the primary); ' +
        'after a failover the service connects again by itself (docs/operations.md, "A database that takes no writes")',
    )
  }
  let host: string | null = null
  let portText: string | null = null
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']')
    if (close < 0) throw new DatabaseUrlError('an IPv6 host is missing its closing "]"')
    host = hostPort.slice(1, close)
    if (isIP(host) !== 6) throw new DatabaseUrlError(`"${host}" in brackets is not an IPv6 address`)
    const rest = hostPort.slice(close + 1)
    if (rest && !rest.startsWith(':'))
      throw new DatabaseUrlError('an IPv6 host must be followed by ":port" or nothing')
    portText = rest ? rest.slice(1) : null
  } else if (hostPort) {
    const colon = hostPort.lastIndexOf(':')
    host = decodePart(colon >= 0 ? hostPort.slice(0, colon) : hostPort, 'the host')
    portText = colon >= 0 ? hostPort.slice(colon + 1) : null
    if (host.includes(':')) throw new DatabaseUrlError('an IPv6 host must be written in brackets: [fd00::5]')
  }

  const parameters = new Map<string, string>()
  for (const pair of query ? query.split('&') : []) {
    if (!pair) continue
    const equals = pair.indexOf('=')
    const name = decodePart(equals >= 0 ? pair.slice(0, equals) : pair, 'a parameter name')
    const value = equals >= 0 ? decodePart(pair.slice(equals + 1), `the parameter "${name}"`) : ''
    if (!(SUPPORTED_PARAMETERS as readonly string[]).includes(name)) {
      throw new DatabaseUrlError(
        `the parameter "${name}" is not supported (supported: ${SUPPORTED_PARAMETERS.join(', ')}); ` +
          'a server setting goes in options=-c name=value',
      )
    }
    if (parameters.has(name)) throw new DatabaseUrlError(`the parameter "${name}" is given twice`)
    parameters.set(name, value)
  }

  // Parameters override the URL's parts, as in libpq.
  if (parameters.has('host')) host = parameters.get('host') || null
  if (parameters.has('port')) portText = parameters.get('port')!
  if (parameters.has('user')) user = parameters.get('user')!
  if (parameters.has('password')) password = parameters.get('password')!
  let database = decodePart(path.replace(/^\//, ''), 'the database name')
  if (parameters.has('dbname')) database = parameters.get('dbname')!

  const port = portText === null || portText === '' ? DEFAULT_PORT : Number(portText)
  if (!/^\d{1,5}$/.test(portText ?? '5432') || !Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new DatabaseUrlError('the port must be a number from 1 to 65535')
  }
  if (!host) {
    throw new DatabaseUrlError(
      'no host: name one, or a Unix-domain socket directory with ?host=/path/to/directory',
    )
  }
  if (!user) throw new DatabaseUrlError('no user name (postgres://user:password@host/database)')
  if (!database) throw new DatabaseUrlError('no database name (postgres://user:password@host/database)')
  const socketDirectory = host.startsWith('/') ? host : null

  const sslText = parameters.get('sslmode')
  let sslMode: SslMode = 'disable'
  if (sslText !== undefined) {
    const mode = SSL_MODES[sslText]
    if (!mode)
      throw new DatabaseUrlError(`sslmode "${sslText}" is not one of ${Object.keys(SSL_MODES).join(', ')}`)
    sslMode = mode
  }
  const rootCertificatePath = parameters.get('sslrootcert')
  let rootCertificates: string | null = null
  if (rootCertificatePath) {
    if (rootCertificatePath !== 'system') {
      try {
        rootCertificates = readCertificateAuthorities(rootCertificatePath, readFile)
      } catch (error) {
        throw new DatabaseUrlError(`sslrootcert ${(error as Error).message}`)
      }
    }
    // libpq: a root certificate makes `require` verify the chain; `system` verifies the host too.
    if (sslMode === 'require' && rootCertificates) sslMode = 'verify-ca'
    if (rootCertificatePath === 'system' && sslMode !== 'disable') sslMode = 'verify-full'
  }
  // verify-full without sslrootcert verifies against the system's certificate authorities; verify-ca
  // has nothing to verify against (libpq would look in ~/.postgresql/root.crt).
  if (sslMode === 'verify-ca' && !rootCertificates) {
    throw new DatabaseUrlError('sslmode=verify-ca needs sslrootcert=<file of the certificate authority>')
  }
  if (socketDirectory && sslMode !== 'disable' && sslMode !== 'prefer') {
    throw new DatabaseUrlError(`sslmode=${sslMode} cannot be used over a Unix-domain socket (no TLS there)`)
  }

  const timeout = parameters.get('connect_timeout')
  if (timeout !== undefined && !/^\d+$/.test(timeout)) {
    throw new DatabaseUrlError('connect_timeout must be a whole number of seconds')
  }
  // Neon's URLs carry channel_binding=require. postgres.js (Drizzle's pool, the listener, the
  // migrations) authenticates with SCRAM-SHA-256 but cannot bind the channel, so `require` cannot be
  // kept; `prefer` and `disable` can (libpq's prefer also falls back when a side cannot bind).
  const channelBinding = parameters.get('channel_binding')
  if (channelBinding !== undefined && channelBinding !== 'prefer' && channelBinding !== 'disable') {
    throw new DatabaseUrlError(
      channelBinding === 'require'
        ? 'channel_binding=require cannot be kept: the PostgreSQL client of the service (postgres.js) cannot bind the channel; use channel_binding=prefer (or leave it out) and sslmode=verify-full, which checks the server'
        : `channel_binding "${channelBinding}" is not one of disable, prefer, require`,
    )
  }
  const sessionAttributes = parameters.get('target_session_attrs')
  if (sessionAttributes !== undefined && !['any', 'read-write', 'primary'].includes(sessionAttributes)) {
    throw new DatabaseUrlError(
      `target_session_attrs "${sessionAttributes}" is not supported: the service writes, so any, read-write or primary`,
    )
  }

  return {
    host: socketDirectory ? null : host,
    socketPath: socketDirectory ? `${withoutTrailingSlashes(socketDirectory)}/.s.PGSQL.${port}` : null,
    port,
    user,
    password,
    database,
    sslMode,
    rootCertificates,
    options: parameters.get('options') || null,
  }
}

function withoutTrailingSlashes(path: string): string {
  let end = path.length
  while (end > 1 && path[end - 1] === '/') end--
  return path.slice(0, end)
}

function decodePart(text: string, what: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new DatabaseUrlError(`${what} is not percent-encoded correctly`)
  }
}

/** Where the service's database is, for logs: no user information. */
export function describeTarget(target: DatabaseTarget): string {
  const where = target.socketPath ?? (isIP(target.host!) === 6 ? `[${target.host}]` : target.host)
  return `postgres://${target.socketPath ? `socket ${where}` : `${where}:${target.port}`}/${target.database}`
}

/** The TLS options both clients take (Node's and Bun's `tls.connect`), for a mode that verifies. */
function verifyingTls(target: DatabaseTarget): Record<string, unknown> {
  return {
    rejectUnauthorized: true,
    ...(target.rootCertificates ? { ca: target.rootCertificates } : {}),
    // verify-ca: the chain, not the name (libpq's meaning)
    ...(target.sslMode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
    ...(target.host && !isIP(target.host) ? { servername: target.host } : {}),
  }
}

/** postgres.js' connection options for the target (merged under the caller's own settings). */
export function postgresJsConnection(target: DatabaseTarget): PostgresJsOptions<Record<string, never>> {
  const ssl =
    target.sslMode === 'disable'
      ? false
      : target.sslMode === 'prefer' || target.sslMode === 'require'
        ? target.sslMode
        : verifyingTls(target)
  return {
    host: target.host ?? undefined,
    port: target.port,
    path: target.socketPath ?? undefined,
    user: target.user,
    pass: target.password,
    database: target.database,
    ssl: ssl as PostgresJsOptions<Record<string, never>>['ssl'],
  }
}

/** Bun.sql's connection options for the target (merged under the caller's own settings). */
export function bunSqlConnection(target: DatabaseTarget): Record<string, unknown> {
  return {
    hostname: target.host ?? 'localhost',
    port: target.port,
    ...(target.socketPath ? { path: target.socketPath } : {}),
    username: target.user,
    password: target.password,
    database: target.database,
    // A string mode for the unverified ones; the verifying ones as TLS options (Bun then verifies
    // the chain, and the host unless checkServerIdentity says otherwise).
    tls:
      target.sslMode === 'disable'
        ? false
        : target.sslMode === 'prefer' || target.sslMode === 'require'
          ? target.sslMode
          : verifyingTls(target),
  }
}

/** The session settings of the URL's `options`, added to the service's own (connectionSettings). */
export function startupOptions(target: DatabaseTarget): Record<string, string> {
  return target.options ? { options: target.options } : {}
}
