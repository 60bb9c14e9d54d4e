import { appendFileSync, chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { loadConfig } from '../../src/config'
import { type AppContext, createContext } from '../../src/context'
import { runMigrations } from '../../src/db/migrate'
import { createMemoryLogger } from '../../src/lib/logger'
import { uniqueEmail } from '../helpers/emails'

/**
 * Processes and services for the reliability suites: free loopback ports, replicas of the service
 * as child processes, a database of their own per test file, a Redis server and a PostgreSQL
 * cluster the tests can stop and start. Everything started here is registered and torn down by
 * `cleanupAll()` (call it in afterAll), so a failing test leaves no process or directory behind.
 */

export const ROOT = join(import.meta.dir, '../..')
const LOOPBACK = '127.0.0.1'

const cleanups: Array<() => Promise<void> | void> = []

/** Runs every registered cleanup, newest first; never throws. */
export async function cleanupAll(): Promise<void> {
  while (cleanups.length > 0) {
    const task = cleanups.pop()!
    try {
      await task()
    } catch (error) {
      console.warn('reliability cleanup failed:', error)
    }
  }
}

const handedOut = new Set<number>()

/**
 * A port nobody listens on right now: bind port 0 on loopback, read it, close. Never the same port
 * twice in one test process, so replicas started together cannot be given one port.
 */
export function freePort(): number {
  for (;;) {
    const listener = Bun.listen({
      hostname: LOOPBACK,
      port: 0,
      socket: { data() {} },
    })
    const { port } = listener
    listener.stop(true)
    if (handedOut.has(port)) continue
    handedOut.add(port)
    return port
  }
}

export function withTimeout<T>(promise: Promise<T>, milliseconds: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${what}: no answer within ${milliseconds} ms`)),
        milliseconds,
      )
    }),
  ]).finally(() => clearTimeout(timer))
}

// ---------------------------------------------------------------------------------------------
// A database of its own per test file, on the PostgreSQL of DATABASE_URL.

export interface TestDatabase {
  url: string
  name: string
  /** A postgres.js client on the database, for assertions (max 2 connections). */
  sql: postgres.Sql
  drop(): Promise<void>
}

/** Creates `lead_capture_rel_<random>` next to DATABASE_URL's database; dropped by cleanupAll. */
export async function createTestDatabase(baseUrl = process.env.DATABASE_URL!): Promise<TestDatabase> {
  const name = `lead_capture_rel_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 })
  try {
    await admin.unsafe(`create database ${name}`)
  } finally {
    await admin.end({ timeout: 5 })
  }
  const url = new URL(baseUrl)
  url.pathname = `/${name}`
  const sql = postgres(url.toString(), { max: 2, onnotice: () => {}, connect_timeout: 5 })
  let dropped = false
  const drop = async () => {
    if (dropped) return
    dropped = true
    await sql.end({ timeout: 5 })
    const dropper = postgres(baseUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 })
    try {
      await dropper.unsafe(`drop database if exists ${name} with (force)`)
    } finally {
      await dropper.end({ timeout: 5 })
    }
  }
  cleanups.push(drop)
  return { url: url.toString(), name, sql, drop }
}

/**
 * A context on the database (no Redis, silent) with migrations applied, for seeding rows with the
 * factories of test/helpers. Closed by cleanupAll.
 */
export async function seedContext(databaseUrl: string): Promise<AppContext> {
  const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', DATABASE_POOL_SIZE: '2' })
  const ctx = await createContext(config, { logger: createMemoryLogger('silent') })
  cleanups.push(() => ctx.close())
  await runMigrations(config, ctx.database, ctx.logger)
  return ctx
}

// ---------------------------------------------------------------------------------------------
// Replicas of the service.

export interface Replica {
  url: string
  port: number
  process: ReturnType<typeof Bun.spawn>
  /** The last lines the process wrote (stdout and stderr), for failure messages. */
  output(): string
  /** SIGTERM, wait for the exit (SIGKILL after 10 s). */
  stop(): Promise<number | null>
  /** SIGKILL, wait for the exit. */
  kill(): Promise<number | null>
}

export interface ReplicaOptions {
  env: Record<string, string | undefined>
  port?: number
  /** Wait for /readyz 200 before returning (default true). */
  waitReady?: boolean
}

/**
 * `bun run src/index.ts` on a free loopback port (or the one given), LOG_LEVEL=warn. When the
 * process dies during start-up on a port chosen here (someone else took it meanwhile), it is
 * started again on another one.
 */
export async function spawnReplica(options: ReplicaOptions): Promise<Replica> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startReplica(options)
    } catch (error) {
      if (options.port !== undefined || attempt >= 3 || !(error instanceof ReplicaExitedError)) throw error
    }
  }
}

class ReplicaExitedError extends Error {}

async function startReplica(options: ReplicaOptions): Promise<Replica> {
  const port = options.port ?? freePort()
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: undefined,
    REDIS_URL: undefined,
    LOG_LEVEL: 'warn',
    ...options.env,
    PORT: String(port),
    HOST: LOOPBACK,
  }
  for (const name of Object.keys(env)) if (env[name] === undefined || env[name] === '') delete env[name]
  const child = Bun.spawn(['bun', 'run', 'src/index.ts'], {
    cwd: ROOT,
    env: env as Record<string, string>,
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const tail = drainKeepingTail(child, 200)

  const exitWithin = async (milliseconds: number) => {
    const code = await Promise.race([child.exited, Bun.sleep(milliseconds).then(() => undefined)])
    return code
  }
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    return (await exitWithin(5000)) ?? null
  }
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
    child.kill('SIGTERM')
    const code = await exitWithin(10_000)
    if (code === undefined) return kill()
    return code
  }
  cleanups.push(async () => {
    await kill()
  })
  const replica: Replica = {
    url: `http://${LOOPBACK}:${port}`,
    port,
    process: child,
    output: () => tail.join(''),
    stop,
    kill,
  }
  if (options.waitReady ?? true) {
    try {
      await waitForReady(replica.url, 30_000, child)
      // A /readyz 200 from another process on the same port would look the same: ours must be alive.
      await Bun.sleep(50)
      if (child.exitCode !== null) throw new Error(`replica exited with code ${child.exitCode}`)
    } catch (error) {
      await kill()
      const message = `${(error as Error).message}\n--- replica output ---\n${replica.output()}`
      throw child.exitCode !== null ? new ReplicaExitedError(message) : new Error(message)
    }
  }
  return replica
}

/**
 * Drains a child's stdout and stderr (a full pipe would block it) and keeps the last `chunks`
 * pieces of output, for failure messages.
 */
function drainKeepingTail(child: { stdout: unknown; stderr: unknown }, chunks: number): string[] {
  const tail: string[] = []
  for (const stream of [child.stdout, child.stderr] as ReadableStream<Uint8Array>[]) {
    void (async () => {
      const decoder = new TextDecoder()
      const reader = stream.getReader()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        tail.push(decoder.decode(value))
        if (tail.length > chunks) tail.splice(0, tail.length - chunks)
      }
    })().catch(() => {})
  }
  return tail
}

/** Polls GET /readyz until 200; fails when the deadline passes or the process exits. */
export async function waitForReady(
  url: string,
  timeoutMs = 30_000,
  child?: { exitCode: number | null },
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => null)
    if (response?.status === 200) return
    if (child && child.exitCode !== null) throw new Error(`replica exited with code ${child.exitCode}`)
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs} ms`)
    await Bun.sleep(50)
  }
}

/** Polls `check` every 25 ms until it returns true; returns the elapsed milliseconds or throws. */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string) {
  const started = Date.now()
  for (;;) {
    if (await check()) return Date.now() - started
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`)
    await Bun.sleep(25)
  }
}

// ---------------------------------------------------------------------------------------------
// Requests.

export interface Sent {
  status: number
  body: Record<string, unknown> | null
  headers: Headers
  ms: number
  /** The request never got an answer (connection refused or reset, or the timeout fired). */
  failed?: string
  timedOut?: boolean
}

/** A POST of a lead to a replica, bounded by `timeoutMs`; never throws. */
export async function postLead(
  baseUrl: string,
  apiKey: string,
  lead: Record<string, unknown>,
  timeoutMs = 10_000,
  headers: Record<string, string> = {},
): Promise<Sent> {
  const started = performance.now()
  try {
    const response = await fetch(`${baseUrl}/api/webhook/lead/${apiKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(lead),
      signal: AbortSignal.timeout(timeoutMs),
    })
    const text = await response.text()
    let body: Record<string, unknown> | null = null
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: response.status, body, headers: response.headers, ms: performance.now() - started }
  } catch (error) {
    const name = (error as Error).name
    return {
      status: 0,
      body: null,
      headers: new Headers(),
      ms: performance.now() - started,
      failed: `${name}: ${(error as Error).message}`,
      timedOut: name === 'TimeoutError' || name === 'AbortError',
    }
  }
}

/** Runs `tasks` with at most `concurrency` in flight, results in order. */
export async function pool<T>(tasks: Array<() => Promise<T>>, concurrency: number): Promise<T[]> {
  const results = new Array<T>(tasks.length)
  let next = 0
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++
      results[index] = await tasks[index]!()
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker))
  return results
}

// ---------------------------------------------------------------------------------------------
// A Redis server of the test's own, to kill and restart.

export interface RedisServer {
  port: number
  url: string
  start(): Promise<void>
  /** SIGKILL: no goodbye to the clients. */
  kill(): Promise<void>
  /** SIGSTOP / SIGCONT: a server that hangs with its connections open, and its recovery. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void
}

export function redisServerAvailable(): boolean {
  return Bun.which('redis-server') !== null
}

/**
 * A redis-server of the test's own on loopback. `tls`: TLS only (no plain port), on 127.0.0.1 and
 * 127.0.0.2, with this certificate (`url` is then rediss://localhost:<port>).
 */
export function redisServer(
  port = freePort(),
  options: { tls?: { certFile: string; keyFile: string } } = {},
): RedisServer {
  let child: ReturnType<typeof Bun.spawn> | undefined
  const kill = async () => {
    if (!child) return
    const running = child
    child = undefined
    running.kill('SIGKILL')
    await withTimeout(running.exited, 5000, 'redis-server exit')
  }
  const tls = options.tls
  const listening = tls
    ? [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--tls-cert-file',
        tls.certFile,
        '--tls-key-file',
        tls.keyFile,
        '--tls-auth-clients',
        'no',
        '--bind',
        `${LOOPBACK} 127.0.0.2`,
      ]
    : ['--port', String(port), '--bind', LOOPBACK]
  const server: RedisServer = {
    port,
    url: tls ? `rediss://localhost:${port}` : `redis://${LOOPBACK}:${port}`,
    async start() {
      if (child) return
      child = Bun.spawn(
        [
          'redis-server',
          ...listening,
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
          '--loglevel',
          'warning',
        ],
        { stdout: 'ignore', stderr: 'ignore' },
      )
      const started = child
      await waitUntil(
        () => {
          if (started.exitCode !== null) throw new Error(`redis-server exited with ${started.exitCode}`)
          const ping = Bun.spawnSync([
            'redis-cli',
            '-h',
            LOOPBACK,
            '-p',
            String(port),
            ...(tls ? ['--tls', '--insecure'] : []),
            'ping',
          ])
          return ping.stdout.toString().trim() === 'PONG'
        },
        10_000,
        `redis-server on port ${port}`,
      )
    },
    kill,
    signal(signal) {
      if (!child) throw new Error('redis-server is not running')
      child.kill(signal)
    },
  }
  cleanups.push(kill)
  return server
}

// ---------------------------------------------------------------------------------------------
// Certificates of a test authority (openssl), for TLS to servers of the tests' own.

export function opensslAvailable(): boolean {
  return Bun.which('openssl') !== null
}

function openssl(args: string[], cwd: string): void {
  const result = Bun.spawnSync(['openssl', ...args], { cwd, stdout: 'pipe', stderr: 'pipe' })
  if (result.exitCode !== 0) throw new Error(`openssl ${args.join(' ')}: ${result.stderr.toString()}`)
}

export interface TestCertificates {
  /** The authority that signed `cert`. */
  ca: string
  /** Another authority, which signed nothing here. */
  otherCa: string
  /** The server's certificate: names localhost, 127.0.0.1 and ::1 (not 127.0.0.2). */
  cert: string
  key: string
}

/**
 * A test authority and a server certificate it signed, in a directory of its own (removed by
 * cleanupAll); the key is readable by the `postgres` user, for a cluster of the tests' own.
 */
export function makeTestCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'lc-rel-tls-'))
  chmodSync(dir, 0o755)
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
  const authority = (name: string, file: string) =>
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        `/CN=${name}`,
        '-keyout',
        `${file}.key`,
        '-out',
        `${file}.pem`,
      ],
      dir,
    )
  authority('test authority', 'ca')
  authority('other authority', 'other-ca')
  openssl(
    [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=localhost',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
    ],
    dir,
  )
  writeFileSync(join(dir, 'names.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n')
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      'names.ext',
      '-out',
      'server.pem',
    ],
    dir,
  )
  const key = join(dir, 'server.key')
  chmodSync(key, 0o600)
  if (isRoot()) Bun.spawnSync(['chown', 'postgres:postgres', key, join(dir, 'server.pem')])
  return { ca: join(dir, 'ca.pem'), otherCa: join(dir, 'other-ca.pem'), cert: join(dir, 'server.pem'), key }
}

// ---------------------------------------------------------------------------------------------
// A PostgreSQL cluster of the test's own, to stop and start (initdb + pg_ctl as user postgres).

export interface PostgresCluster {
  port: number
  url: string
  start(): Promise<void>
  stop(mode?: 'immediate' | 'fast'): Promise<void>
  destroy(): Promise<void>
}

export function postgresBinDir(): string | null {
  for (const version of ['17', '16', '15', '14', '13']) {
    const dir = `/usr/lib/postgresql/${version}/bin`
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir
  }
  return null
}

const isRoot = () => process.getuid?.() === 0

/** Runs a PostgreSQL binary, as the `postgres` user when this process is root (initdb refuses root). */
function runPostgresTool(bin: string, args: string[], timeoutMs: number): void {
  const command = isRoot() ? ['runuser', '-u', 'postgres', '--', bin, ...args] : [bin, ...args]
  const result = Bun.spawnSync(command, { stdout: 'pipe', stderr: 'pipe', timeout: timeoutMs })
  if (result.exitCode !== 0) {
    throw new Error(
      `${command.join(' ')} failed (${result.exitCode}): ${result.stderr.toString()}${result.stdout.toString()}`,
    )
  }
}

export interface PostgresClusterOptions {
  maxConnections?: number
  /**
   * The superuser's password: every connection, TCP and socket, then authenticates with
   * scram-sha-256 (trust otherwise), and the cluster's `url` carries it, percent-encoded.
   */
  password?: string
  /** The server's certificate and key (PEM files): TLS on, offered on every TCP connection. */
  tls?: { certFile: string; keyFile: string }
  /** The addresses it listens on (default the loopback address); the socket is in `socketDirectory`. */
  listen?: string[]
}

export async function createPostgresCluster(
  port = freePort(),
  options: PostgresClusterOptions = {},
): Promise<PostgresCluster & { socketDirectory: string }> {
  const bin = postgresBinDir()
  if (!bin) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql/*/bin')
  const root = mkdtempSync(join(tmpdir(), 'lc-rel-pg-'))
  const dataDir = join(root, 'data')
  if (isRoot()) Bun.spawnSync(['chown', 'postgres:postgres', root])
  let running = false
  const authentication = ['-A', 'trust']
  if (options.password !== undefined) {
    const passwordFile = join(root, 'password')
    writeFileSync(passwordFile, `${options.password}\n`)
    if (isRoot()) Bun.spawnSync(['chown', 'postgres:postgres', passwordFile])
    authentication.splice(0, 2, '-A', 'scram-sha-256', `--pwfile=${passwordFile}`)
  }
  runPostgresTool(
    join(bin, 'initdb'),
    ['-D', dataDir, ...authentication, '-U', 'postgres', '--no-sync', '-E', 'UTF8'],
    60_000,
  )
  const listen = options.listen ?? [LOOPBACK]
  // initdb allows 127.0.0.1 and ::1 only: every loopback address listened on is let in the same way.
  appendFileSync(
    join(dataDir, 'pg_hba.conf'),
    `host all all 127.0.0.0/8 ${options.password === undefined ? 'trust' : 'scram-sha-256'}\n`,
  )
  const tlsSettings = options.tls
    ? ` -c ssl=on -c ssl_cert_file=${options.tls.certFile} -c ssl_key_file=${options.tls.keyFile}`
    : ''
  const credentials =
    options.password === undefined ? 'postgres' : `postgres:${encodeURIComponent(options.password)}`
  const pgCtl = (args: string[], timeoutMs = 30_000) =>
    runPostgresTool(join(bin, 'pg_ctl'), ['-D', dataDir, ...args], timeoutMs)
  const cluster: PostgresCluster & { socketDirectory: string } = {
    port,
    url: `postgres://${credentials}@${LOOPBACK}:${port}/postgres`,
    socketDirectory: root,
    async start() {
      // -l: the server's output goes to a file, so pg_ctl returns instead of holding our pipe open.
      pgCtl([
        '-o',
        `-p ${port} -k ${root} -c listen_addresses=${listen.join(',')} -c fsync=off -c max_connections=${options.maxConnections ?? 60}${tlsSettings}`,
        '-l',
        join(root, 'server.log'),
        '-w',
        '-t',
        '30',
        'start',
      ])
      running = true
    },
    async stop(mode = 'immediate') {
      pgCtl(['-m', mode, '-w', '-t', '30', 'stop'])
      running = false
    },
    async destroy() {
      if (running) {
        try {
          pgCtl(['-m', 'immediate', '-w', '-t', '30', 'stop'])
        } catch {}
        running = false
      }
      rmSync(root, { recursive: true, force: true })
    },
  }
  cleanups.push(() => cluster.destroy())
  return cluster
}

// ---------------------------------------------------------------------------------------------
// Seeding through the API of a running replica (works on PGlite too, where no second process may
// open the database).

/** Signs up a new organization on `baseUrl` and creates `count` sources; returns their keys. */
export async function seedThroughApi(
  baseUrl: string,
  count: number,
): Promise<{ token: string; apiKeys: string[] }> {
  const signup = await fetch(`${baseUrl}/api/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email: uniqueEmail('owner'),
      password: `pw-${crypto.randomUUID()}`,
      organization_name: 'Reliability Co',
    }),
  })
  if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${await signup.text()}`)
  const { token } = (await signup.json()) as { token: string }
  const apiKeys: string[] = []
  for (let index = 0; index < count; index++) {
    const created = await fetch(`${baseUrl}/api/webhook/sources`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: `source ${index}` }),
    })
    if (created.status !== 201) throw new Error(`create source: ${created.status} ${await created.text()}`)
    apiKeys.push(((await created.json()) as { api_key: string }).api_key)
  }
  return { token, apiKeys }
}

/** Nearest-rank percentile of `values` (0 < p ≤ 100). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

/**
 * Open-loop load: `send(index)` started every 1000/rate ms for `durationMs`, whether or not earlier
 * ones have answered (a closed loop would slow down with the server and hide its stalls).
 */
export async function openLoop<T>(
  rate: number,
  durationMs: number,
  send: (index: number) => Promise<T>,
): Promise<T[]> {
  const started = performance.now()
  const total = Math.floor((rate * durationMs) / 1000)
  const inFlight: Promise<T>[] = []
  for (let index = 0; index < total; index++) {
    const due = started + (index * 1000) / rate
    const wait = due - performance.now()
    if (wait > 1) await Bun.sleep(wait)
    inFlight.push(send(index))
  }
  return Promise.all(inFlight)
}

// ---------------------------------------------------------------------------------------------
// HAProxy (Debian's package) in front of replicas, with a config written by the test.

export interface Haproxy {
  url: string
  /** Rows of the stats CSV for the backend's servers: name → { status, chkdown, … }. */
  servers(): Promise<Record<string, Record<string, string>>>
  output(): string
  stop(): Promise<void>
}

export function haproxyAvailable(): boolean {
  return Bun.which('haproxy') !== null
}

/**
 * Starts `haproxy -db -f <config>` (foreground) with the config `build(port, statsPort)` returns;
 * the stats page must be served on `statsPort` at `/stats`. Stopped by pid (cleanupAll).
 */
export async function startHaproxy(build: (port: number, statsPort: number) => string): Promise<Haproxy> {
  const port = freePort()
  const statsPort = freePort()
  const root = mkdtempSync(join(tmpdir(), 'lc-rel-haproxy-'))
  const configPath = join(root, 'haproxy.cfg')
  await Bun.write(configPath, build(port, statsPort))
  const check = Bun.spawnSync(['haproxy', '-c', '-q', '-f', configPath], { stdout: 'pipe', stderr: 'pipe' })
  if (check.exitCode !== 0) throw new Error(`haproxy config invalid: ${check.stderr.toString()}`)
  const child = Bun.spawn(['haproxy', '-db', '-f', configPath], { stdout: 'pipe', stderr: 'pipe' })
  const tail = drainKeepingTail(child, 400)
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await withTimeout(child.exited, 5000, 'haproxy exit').catch(() => child.kill('SIGKILL'))
    rmSync(root, { recursive: true, force: true })
  }
  cleanups.push(stop)
  const servers = async () => {
    const csv = await (await fetch(`http://${LOOPBACK}:${statsPort}/stats;csv`)).text()
    const [header, ...rows] = csv.trim().split('\n')
    const names = header!.replace(/^# /, '').split(',')
    const result: Record<string, Record<string, string>> = {}
    for (const row of rows) {
      const values = row.split(',')
      const record = Object.fromEntries(names.map((name, index) => [name, values[index] ?? '']))
      if (record.svname !== 'FRONTEND' && record.svname !== 'BACKEND') result[record.svname!] = record
    }
    return result
  }
  await waitUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`haproxy exited: ${tail.join('')}`)
      return (await servers().catch(() => null)) !== null
    },
    10_000,
    'haproxy stats page',
  )
  return { url: `http://${LOOPBACK}:${port}`, servers, output: () => tail.join(''), stop }
}

export { uniqueEmail }
