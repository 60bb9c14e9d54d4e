import { type Static, Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { DatabaseUrlError, parseDatabaseUrl } from './db/database-url'
import { readCertificateAuthorities } from './lib/certificates'
import { parseCidr } from './lib/ip'

/**
 * The one place that reads the environment. Every variable is validated once at start-up; a bad
 * value stops the process with a message that names every bad variable (not just the first).
 */
const Plan = Type.Union([Type.Literal('free'), Type.Literal('pro'), Type.Literal('enterprise')])
const LogLevel = Type.Union(['debug', 'info', 'warn', 'error', 'silent'].map((level) => Type.Literal(level)))

// A webhook secrets key: 32 bytes in base64 (`openssl rand -base64 32`).
const SECRETS_KEY_PATTERN = '^[A-Za-z0-9+/]{43}=$'

export const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  // Several replicas on one host share PORT (SO_REUSEPORT, Linux): one per core (docs/operations.md).
  REUSE_PORT: Type.Boolean({ default: false }),
  PUBLIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s/]+(/[^\\s]*)?$' })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  // The certificate authority (a PEM file) a rediss:// Redis's certificate must be signed by, when
  // not one the system trusts (a private authority); read at start.
  REDIS_TLS_CA_FILE: Type.Optional(Type.String({ minLength: 1 })),
  DATA_DIR: Type.String({ minLength: 1, default: './.data' }),
  TRUST_PROXY: Type.String({ default: '' }),
  LOG_LEVEL: Type.Union(LogLevel.anyOf, { default: 'info' }),
  DEFAULT_PLAN: Type.Union(Plan.anyOf, { default: 'pro' }),
  SIGNUP_ENABLED: Type.Boolean({ default: true }),
  LOG_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
  PLATFORM_RATE_LIMIT_PER_MIN: Type.Integer({ minimum: 1, default: 600_000 }),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 200, default: 10 }),
  // How long a statement of the service waits for a lock another session holds (an ALTER TABLE, a
  // LOCK TABLE, a source being deleted) before its request is answered 503 with nothing written;
  // 0 waits as long as the lock is held. PostgreSQL only (PGlite has one session).
  DATABASE_LOCK_TIMEOUT_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 5_000 }),
  // At most this many group-commit statements in flight (unset: 1, capped by the pool). One at a
  // time makes the largest groups: fewest statements and commits per lead, and on a 2-core machine
  // the lowest tail at 1,000 leads/s with no loss at saturation (docs/benchmarks.md, "Group-commit
  // statements in flight"). More overlap round trips on a database with cores to spare.
  INGEST_GROUPS_IN_FLIGHT: Type.Optional(Type.Integer({ minimum: 1, maximum: 200 })),
  // A saturated replica's groups (16 leads or more) on a connection of their own, the next one
  // pipelined behind the running one (one of DATABASE_POOL_SIZE, from a pool of 3): a few per cent
  // more throughput at saturation on a slow machine, less on a fast one, a higher p99 at 1,000
  // leads/s (docs/benchmarks.md, A18-A21).
  INGEST_PIPELINE: Type.Boolean({ default: false }),
  // How long a group of leads waits for the database's answer before its leads are answered 503
  // and the connections of the hot statements are replaced: a database host that vanished without
  // closing its connections would otherwise hold every later lead of the replica (src/db/client.ts
  // replaceHotConnections, docs/operations.md "A database host that vanishes").
  INGEST_ANSWER_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 15_000 }),
  // A statement of postgres.js' shared pool (Drizzle's: management, uncached sources, refused
  // POSTs' log entries, transactions, periodic jobs) or of a connection of its own (the log
  // retention's) unanswered this long makes the replica ask the server, on a new connection,
  // whether its backend is still at work; a backend gone, or waiting for the replica's next message,
  // means the connection lost its server and its pool is replaced (src/db/renewable-pool.ts, docs/operations.md "A database host that
  // vanishes"). The LISTEN connection is checked as often by a notification of the replica's own.
  // 0: never checked.
  DATABASE_UNANSWERED_CHECK_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 5_000 }),
  // Which client sends the parameterised hot statements (the group commit, the delivery log):
  // Bun's built-in Bun.sql or postgres.js (Drizzle's driver, which runs everything else either way).
  // docs/benchmarks.md has the comparison. Unset with a pool of 1: postgres.js (see loadConfig).
  DATABASE_DRIVER: Type.Union([Type.Literal('postgres-js'), Type.Literal('bun-sql')], {
    default: 'bun-sql',
  }),
  // The rate limiter's Redis client: ioredis or Bun's built-in RedisClient (same script, same breaker).
  REDIS_DRIVER: Type.Union([Type.Literal('ioredis'), Type.Literal('bun')], { default: 'ioredis' }),
  // Every key this deployment writes in Redis starts with it: two deployments sharing one Redis
  // (staging and production, two tenants of a managed Redis) must set different ones, or they share
  // every limit's counts. The default is what all keys were named before the setting existed.
  REDIS_KEY_PREFIX: Type.String({ pattern: '^[A-Za-z0-9:._-]{1,64}$', default: 'rl:' }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 10_000 }),
  SHUTDOWN_DELAY_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 5_000 }),
  // 32 bytes, base64: encrypts webhook signing secrets at rest (unset: a key kept in DATA_DIR).
  WEBHOOK_SECRETS_KEY: Type.Optional(Type.String({ pattern: SECRETS_KEY_PATTERN })),
  // Earlier keys, comma-separated: secrets sealed with them still open (key rotation, docs/webhooks.md).
  WEBHOOK_SECRETS_PREVIOUS_KEYS: Type.String({ default: '' }),
  OUTBOUND_ALLOW_PRIVATE_NETWORKS: Type.Boolean({ default: false }),
  WEBHOOK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 15_000 }),
  // Logs every periodic job run, every event-loop stall with its cause and every group-commit group
  // whose statement or wait took 3 ms or more (bench/stall-timeline.ts).
  DIAGNOSE_STALLS: Type.Boolean({ default: false }),
  // Inbound first (docs/webhooks.md): a saturated replica defers lead events to a floor rate.
  WEBHOOK_INBOUND_FIRST: Type.Boolean({ default: true }),
})

export type Env = Static<typeof EnvSchema>
export type PlanName = Static<typeof Plan>
export type LogLevelName = 'debug' | 'info' | 'warn' | 'error' | 'silent'

export interface Config {
  port: number
  host: string
  reusePort: boolean
  publicBaseUrl: string
  /**
   * PUBLIC_BASE_URL's path, '' at a host's root (`/crm/leads` for `https://tools.example.com/crm/leads`):
   * a proxy serves the service there and strips it, so every URL the dashboard hands a browser (links,
   * forms, redirects, its cookies' Path) starts with it.
   */
  publicBasePath: string
  databaseUrl: string | undefined
  redisUrl: string | undefined
  /** REDIS_TLS_CA_FILE's certificates (PEM text), for a rediss:// REDIS_URL. */
  redisTlsCa: string | undefined
  dataDir: string
  trustProxy: string[]
  logLevel: LogLevelName
  defaultPlan: PlanName
  signupEnabled: boolean
  logRetentionDays: number
  platformRateLimitPerMin: number
  databasePoolSize: number
  /** PostgreSQL's lock_timeout on every connection of the service's pools (DATABASE_LOCK_TIMEOUT_MS; 0: none). */
  databaseLockTimeoutMs: number
  /** Group-commit statements in flight at most (src/modules/inbound/group-commit.ts); never above the pool. */
  ingestGroupsInFlight: number
  /** INGEST_PIPELINE: the group commit's own pipelined connection (src/db/client.ts). */
  ingestPipeline: boolean
  /** A group without the database's answer after this long is answered 503 (INGEST_ANSWER_TIMEOUT_MS). */
  ingestAnswerTimeoutMs: number
  /** When an unanswered statement of the shared pool is checked (DATABASE_UNANSWERED_CHECK_MS; 0: never). */
  databaseUnansweredCheckMs: number
  /** The client of the hot statements; `bun-sql` splits DATABASE_POOL_SIZE between two pools (src/db/client.ts). */
  databaseDriver: 'postgres-js' | 'bun-sql'
  redisDriver: 'ioredis' | 'bun'
  /** Start of every Redis key (REDIS_KEY_PREFIX). */
  redisKeyPrefix: string
  shutdownTimeoutMs: number
  /** After SIGTERM: /readyz answers 503 and everything else is still served for this long. */
  shutdownDelayMs: number
  /** Base64 key that encrypts webhook signing secrets; undefined: one is made and kept in DATA_DIR. */
  webhookSecretsKey: string | undefined
  /** Keys that sealed secrets before WEBHOOK_SECRETS_KEY: still opened, never used to seal. */
  webhookSecretsPreviousKeys: string[]
  /** Lets outbound webhooks reach private addresses and plain http (tests, on-premise installs). */
  outboundAllowPrivateNetworks: boolean
  /** An outbound webhook attempt fails when the receiver has not answered within this time. */
  webhookTimeoutMs: number
  /** Log each periodic job run (duration, event-loop blocking) and each event-loop stall (src/lib/stall-probe.ts). */
  diagnoseStalls: boolean
  /** Defer lead events to a floor rate while the lead path is saturated (docs/webhooks.md, "Inbound first"). */
  webhookInboundFirst: boolean
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`)
    this.name = 'ConfigError'
  }
}

const BOOLEAN_WORDS: Record<string, boolean> = {
  true: true,
  '1': true,
  yes: true,
  false: false,
  '0': false,
  no: false,
}

export function loadConfig(environment: Record<string, string | undefined> = process.env): Config {
  const raw: Record<string, unknown> = {}
  const problems: string[] = []
  for (const [name, schema] of Object.entries(EnvSchema.properties)) {
    const text = environment[name]
    if (text === undefined || text === '') continue
    // `docker run --env-file` (and a manifest's value written with quotes inside the string) keeps
    // quotes as part of the value: `"postgres://…"` would be refused for its scheme, a quoted HOST
    // or DATA_DIR taken as a name with quotes in it. No variable's value starts and ends with one.
    if (/^(["']).*\1$/s.test(text.trim()) && text.trim().length >= 2) {
      problems.push(
        `${name}: the value is wrapped in quotes, which are part of it here (docker --env-file keeps them): remove them`,
      )
      continue
    }
    if (schema.type === 'integer') {
      raw[name] = /^-?\d+$/.test(text.trim()) ? Number(text.trim()) : text
    } else if (schema.type === 'boolean') {
      const word = BOOLEAN_WORDS[text.trim().toLowerCase()]
      raw[name] = word ?? text
    } else {
      raw[name] = text.trim()
    }
  }
  const withDefaults = Value.Default(EnvSchema, raw) as Record<string, unknown>
  // bun-sql splits the pool in two, which one connection cannot be: a pool of 1 that did not ask for
  // bun-sql keeps postgres.js alone instead of failing at start.
  if (!environment.DATABASE_DRIVER?.trim() && withDefaults.DATABASE_POOL_SIZE === 1)
    withDefaults.DATABASE_DRIVER = 'postgres-js'
  for (const error of Value.Errors(EnvSchema, withDefaults)) {
    const name = error.path.replace(/^\//, '')
    problems.push(`${name}: ${error.message} (got ${describeValue(name, environment[name])})`)
  }
  const trustProxy = commaSeparated(withDefaults.TRUST_PROXY)
  for (const entry of trustProxy) {
    if (!parseCidr(entry)) problems.push(`TRUST_PROXY: "${entry}" is not an IP address or CIDR range`)
  }
  const previousSecretsKeys = commaSeparated(withDefaults.WEBHOOK_SECRETS_PREVIOUS_KEYS)
  for (const [index, key] of previousSecretsKeys.entries()) {
    if (!new RegExp(SECRETS_KEY_PATTERN).test(key))
      problems.push(`WEBHOOK_SECRETS_PREVIOUS_KEYS: key ${index + 1} is not 32 bytes in base64`)
  }
  // The service's own reading of DATABASE_URL (src/db/database-url.ts), at start: a form it cannot
  // use is refused here, by name, rather than by a client's failure at its first connection.
  if (
    typeof withDefaults.DATABASE_URL === 'string' &&
    !problems.some((problem) => problem.startsWith('DATABASE_URL:'))
  ) {
    try {
      parseDatabaseUrl(withDefaults.DATABASE_URL)
    } catch (error) {
      if (!(error instanceof DatabaseUrlError)) throw error
      problems.push(`DATABASE_URL: ${error.message}`)
    }
  }
  if (
    typeof withDefaults.PUBLIC_BASE_URL === 'string' &&
    !problems.some((problem) => problem.startsWith('PUBLIC_BASE_URL:'))
  ) {
    const problem = publicBaseUrlProblem(withDefaults.PUBLIC_BASE_URL)
    if (problem) problems.push(`PUBLIC_BASE_URL: ${problem}`)
  }
  let redisTlsCa: string | undefined
  if (typeof withDefaults.REDIS_TLS_CA_FILE === 'string') {
    const file = withDefaults.REDIS_TLS_CA_FILE
    if (typeof withDefaults.REDIS_URL !== 'string' || !withDefaults.REDIS_URL.startsWith('rediss://')) {
      problems.push('REDIS_TLS_CA_FILE: needs a rediss:// REDIS_URL (TLS)')
    } else {
      try {
        redisTlsCa = readCertificateAuthorities(file)
      } catch (error) {
        problems.push(`REDIS_TLS_CA_FILE: ${(error as Error).message}`)
      }
    }
  }
  if (withDefaults.DATABASE_DRIVER === 'bun-sql' && withDefaults.DATABASE_POOL_SIZE === 1)
    problems.push('DATABASE_DRIVER: bun-sql needs DATABASE_POOL_SIZE of 2 or more (the pool is split in two)')
  if (problems.length > 0) throw new ConfigError(uniqueByVariable(problems))
  const env = withDefaults as Env
  const publicBaseUrl = (env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, '')
  return {
    port: env.PORT,
    host: env.HOST,
    reusePort: env.REUSE_PORT,
    publicBaseUrl,
    publicBasePath: new URL(publicBaseUrl).pathname.replace(/\/+$/, ''),
    databaseUrl: env.DATABASE_URL,
    redisUrl: env.REDIS_URL,
    redisTlsCa,
    dataDir: env.DATA_DIR,
    trustProxy,
    logLevel: env.LOG_LEVEL as LogLevelName,
    defaultPlan: env.DEFAULT_PLAN,
    signupEnabled: env.SIGNUP_ENABLED,
    logRetentionDays: env.LOG_RETENTION_DAYS,
    platformRateLimitPerMin: env.PLATFORM_RATE_LIMIT_PER_MIN,
    databasePoolSize: env.DATABASE_POOL_SIZE,
    databaseLockTimeoutMs: env.DATABASE_LOCK_TIMEOUT_MS,
    ingestGroupsInFlight: Math.min(env.INGEST_GROUPS_IN_FLIGHT ?? 1, env.DATABASE_POOL_SIZE),
    ingestPipeline: env.INGEST_PIPELINE,
    ingestAnswerTimeoutMs: env.INGEST_ANSWER_TIMEOUT_MS,
    databaseUnansweredCheckMs: env.DATABASE_UNANSWERED_CHECK_MS,
    databaseDriver: env.DATABASE_DRIVER,
    redisDriver: env.REDIS_DRIVER,
    redisKeyPrefix: env.REDIS_KEY_PREFIX,
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    shutdownDelayMs: env.SHUTDOWN_DELAY_MS,
    webhookSecretsKey: env.WEBHOOK_SECRETS_KEY,
    webhookSecretsPreviousKeys: previousSecretsKeys,
    outboundAllowPrivateNetworks: env.OUTBOUND_ALLOW_PRIVATE_NETWORKS,
    webhookTimeoutMs: env.WEBHOOK_TIMEOUT_MS,
    diagnoseStalls: env.DIAGNOSE_STALLS,
    webhookInboundFirst: env.WEBHOOK_INBOUND_FIRST,
  }
}

/**
 * The variables whose value may carry a secret: a password in a URL's user information, an
 * encryption key. A bad value of one is described, never quoted: the message goes to stderr, and
 * from there to whatever collects the container's logs. test/unit/config.test.ts holds every
 * variable named like a secret (`…_URL`, `…_KEY`, `…_KEYS`, `…SECRET…`, `…PASSWORD…`, `…TOKEN…`) to
 * this list.
 */
export const SECRET_BEARING_VARIABLES: Readonly<Record<string, 'url' | 'key'>> = {
  DATABASE_URL: 'url',
  REDIS_URL: 'url',
  PUBLIC_BASE_URL: 'url',
  WEBHOOK_SECRETS_KEY: 'key',
  WEBHOOK_SECRETS_PREVIOUS_KEYS: 'key',
}

/** A bad value as a problem quotes it: as given, or for a secret-bearing variable what it is. */
export function describeValue(name: string, value: string | undefined): string {
  const kind = SECRET_BEARING_VARIABLES[name]
  if (!kind || value === undefined) return JSON.stringify(value)
  const scheme = kind === 'url' ? /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(value.trim())?.[1] : undefined
  return scheme
    ? `a ${JSON.stringify(`${scheme}://`)} URL, not quoted: it may hold a password`
    : `${value.length} characters, not quoted: the value may be a secret`
}

/**
 * Why PUBLIC_BASE_URL cannot be the start of the URLs the service hands out, or null. Webhook URLs
 * and the dashboard's links are this value followed by a path, so a query or fragment would end up
 * in the middle of every one, a user name and password would be handed to every website that posts
 * leads, and a path a browser rewrites (`/a/../b`, a space) would not be the path the proxy sees.
 */
function publicBaseUrlProblem(value: string): string | null {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return 'not a URL'
  }
  if (url.username || url.password)
    return 'holds a user name or password, which every webhook URL would carry'
  if (url.search || url.hash || /[?#]/.test(value))
    return 'holds a query or a fragment: give the scheme, host and path only'
  const path = /^https?:\/\/[^/]+(\/.*)?$/.exec(value)?.[1] ?? '/'
  if (url.pathname !== path) {
    return `its path must be written as a browser sends it (${JSON.stringify(url.pathname)}): no dot segments, special characters percent-encoded`
  }
  return null
}

/** A comma-separated variable's entries, trimmed, empty ones dropped. */
function commaSeparated(value: unknown): string[] {
  return String(value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
}

// TypeBox reports a union failure once per member; one line per variable is easier to read.
function uniqueByVariable(problems: string[]): string[] {
  const seen = new Set<string>()
  return problems.filter((problem) => {
    const name = problem.split(':')[0] ?? problem
    if (seen.has(name)) return false
    seen.add(name)
    return true
  })
}
