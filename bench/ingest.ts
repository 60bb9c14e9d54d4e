import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { addSources, provisionOrganization } from './provision'
import {
  ADMIN_DATABASE_URL,
  addWebhookEndpoint,
  BENCH_WEBHOOK_ENV,
  checkoutBaseline,
  countDiskStalls,
  cpuJiffies,
  cpuShares,
  type DatabaseWrites,
  type DatabaseWritesPerRequest,
  type DiskStalls,
  databaseWrites,
  databaseWritesPerRequest,
  describeDatabaseWrites,
  describeDiskStalls,
  freshDatabase,
  log,
  medianBy,
  megabytes,
  type OutboxBacklog,
  outboxBacklog,
  parseEnvAssignments,
  ROOT,
  round,
  runTag,
  runWrk,
  type SpawnOptions,
  spawnServer,
  spawnService,
  type WrkResult,
} from './support'

// Moved to support.ts (bench:cpu and bench:cpu-split use them without this module's arguments).
export { checkoutBaseline, runTag }

/**
 * `bun run bench:ingest`: the inbound endpoint against two least-work handlers (Bun.serve, one
 * INSERT per request: one on postgres.js, one on Bun's built-in Bun.sql; bench/reference-server.ts),
 * same payload, same wrk settings, same PostgreSQL. Every
 * request carries a distinct e-mail, spread over SOURCES keys, so every request creates a lead and
 * no key reaches its 60/min limit. Prints requests/s, p50/p99 and peak RSS of each and the ratios.
 *
 * Throughput is what a server sustains once it is saturated, and how many connections saturate it
 * differs: with 50 the reference already keeps both cores ~85% busy, while the service, which
 * waits on a Redis round trip and a group commit per request, leaves ~28% of them idle (measured
 * per process from /proc). So each process is warmed once and then driven at every level of
 * CONNECTION_LEVELS in turn; its throughput is the best level, and every level is kept and printed.
 *
 * More contenders join the same alternating rounds (docs/benchmarks.md, "Comparing variants"):
 *   --service-variants default,postgresjs,bunsql,bunredis,both   the service once per client switch (or
 *                                  `NAME=value+NAME=value` for any other environment)
 *   --baseline <rev>[,<rev>…]      each commit's service, from a temporary worktree, on a database
 *                                  of its own made by that commit's CLI and migrations (so an old
 *                                  commit runs its own SQL functions, see checkoutBaseline)
 *   --endpoint                     one webhook endpoint (lead.created) with a loopback receiver
 *                                  for every service contender; the variant `endpoint` instead
 *                                  enables it for that contender only (the default service without
 *                                  an endpoint and with one in the same rounds: issue [6]'s 10%),
 *                                  `endpoint+NAME=value` with more environment
 *                                  Each such service keeps running after its load until its outbox
 *                                  is drained: the drain time and exactly-once check are recorded
 *   --replicas N                   every contender as N processes on one port (SO_REUSEPORT)
 *   --quick                        one level, one round, short runs: a check, not a measurement
 *   --services-only                leave the two handlers out: a run that compares service variants
 *                                  with each other only (issue [6]'s endpoint against none) spends
 *                                  no time on them; no handler ratios are printed
 * And in the environment: BENCH_ORDER=mirror (even rounds in reverse order instead of rotated; each
 * service of this checkout then sends to a second key set of its database in even rounds) and
 * BENCH_CHECKPOINT_BETWEEN=1 (a CHECKPOINT before every run), for a server that drifts over a run.
 */
const { values: cli } = parseArgs({
  // Under `bun test` (which sets NODE_ENV=test) the arguments are the test runner's: the unit tests
  // import this module for its schedule functions.
  args: process.env.NODE_ENV === 'test' ? [] : Bun.argv.slice(2),
  options: {
    'service-variants': { type: 'string' },
    baseline: { type: 'string' },
    endpoint: { type: 'boolean', default: false },
    replicas: { type: 'string' },
    quick: { type: 'boolean', default: false },
    'services-only': { type: 'boolean', default: false },
  },
  strict: true,
})
const QUICK = cli.quick === true
const SOURCES = Number(process.env.BENCH_SOURCES ?? 10_000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? (QUICK ? 3 : 8))
// Long enough for a new process to reach steady state (JIT, pools, every source cached); both servers
// get the same. One process's warm-up plus every level stays below the 60/min of any key: at
// 8 s + 3 x 8 s and 10,000 keys, a key's 60th request in a minute would take ~19,000 req/s (the
// service reached 18,777 in a level of 2026-11-24's B5). The source count is part of issue [7]'s
// method (the peak RSS holds every source in the cache: B6 with 20,000 peaked at 172 MB against
// 137 MB with 10,000 in B5), so it stays; a faster service is compared with BENCH_SOURCES=20000
// for every contender alike.
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? (QUICK ? 3 : 8))
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 3))
const CONNECTION_LEVELS = (process.env.BENCH_CONNECTIONS ?? (QUICK ? '100' : '50,100,200'))
  .split(',')
  .map((level) => Number(level.trim()))
  .filter((level) => Number.isInteger(level) && level > 0)
if (CONNECTION_LEVELS.length === 0)
  throw new Error('BENCH_CONNECTIONS: give one or more connection counts, e.g. 50,100,200')
const THREADS = Number(process.env.BENCH_THREADS ?? 1)
const POOL_SIZE = String(process.env.BENCH_POOL_SIZE ?? 10)
const REPLICAS = Number(cli.replicas ?? 1)
if (!Number.isInteger(REPLICAS) || REPLICAS < 1) throw new Error('--replicas: a whole number of 1 or more')
/** How long a service may take to drain its outbox after its load before the run gives up waiting. */
const DRAIN_TIMEOUT_SECONDS = Number(process.env.BENCH_DRAIN_TIMEOUT_SECONDS ?? 900)

/** The client switches of issue [7] (src/config.ts), by the names `--service-variants` takes. */
const SERVICE_VARIANTS: Record<string, Record<string, string>> = {
  default: {},
  bunsql: { DATABASE_DRIVER: 'bun-sql' },
  /** postgres.js for the hot statements too (the default before bun-sql). */
  postgresjs: { DATABASE_DRIVER: 'postgres-js' },
  bunredis: { REDIS_DRIVER: 'bun' },
  both: { DATABASE_DRIVER: 'bun-sql', REDIS_DRIVER: 'bun' },
  /** The default service with the benchmark's webhook endpoint enabled while it runs. */
  endpoint: {},
  /** The same with inbound first off: every event sent at once (the policy's paired comparison). */
  'endpoint-eager': { WEBHOOK_INBOUND_FIRST: 'false' },
}
/**
 * Variants that run with the webhook endpoint enabled (the others run with it disabled), and
 * `endpoint+NAME=value+…`: the endpoint with more environment.
 */
const ENDPOINT_VARIANTS = new Set(['endpoint', 'endpoint-eager'])
const isEndpointVariant = (name: string) => ENDPOINT_VARIANTS.has(name) || name.startsWith('endpoint+')

function variantEnv(name: string): Record<string, string> {
  const known = SERVICE_VARIANTS[name]
  if (known) return known
  if (name.startsWith('endpoint+')) return variantEnv(name.slice('endpoint+'.length))
  if (!name.includes('='))
    throw new Error(
      `--service-variants: ${name} is none of ${Object.keys(SERVICE_VARIANTS).join(', ')} nor NAME=value`,
    )
  return parseEnvAssignments(name)
}

/** With the disk's stalls during the level (a commit waits for its WAL on disk, every contender's alike). */
export interface IngestFigures extends DiskStalls {
  /** What the PostgreSQL server wrote per request during the level (absent where it cannot say). */
  databaseWrites?: DatabaseWritesPerRequest
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  peakRssMb: number
  requests: number
  non2xx: number
  socketErrors: number
  connections: number
  /** The machine's CPU time during the level: left idle, and stolen by the hypervisor (%). */
  idlePct: number
  stealPct: number
}

/** One process: its best level (the throughput) and every level it was driven at. */
export interface IngestRun extends IngestFigures {
  levels: IngestFigures[]
  /** 2xx answers over the warm-up and every level. */
  answered: number
  /**
   * Counted after a service's run: leads stored; with an endpoint, how long the outbox took to drain
   * after the load stopped and whether every lead's event arrived exactly once.
   */
  extra?: Record<string, number | boolean>
}

async function measure(
  label: string,
  start: () => ReturnType<typeof spawnServer>,
  keysFile: string,
  /** Run after the last level while the server still runs (the outbox drain). */
  afterLoad?: () => Promise<void>,
): Promise<IngestRun> {
  // The tag starts every e-mail wrk sends: a label such as `service [bunsql]` would make them invalid
  // (answered 200 as missing_contact, storing no lead), so only letters, digits and dashes.
  const tagBase = label.replace(/[^A-Za-z0-9]+/g, '-')
  const server = await start()
  // The server's write counters around each level (pg_stat_wal, pg_stat_bgwriter): a contender that
  // slows as its tables grow shows it here first (docs/benchmarks.md, A42).
  const stats = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    log(`${label}: warm-up ${WARMUP_SECONDS}s`)
    const warm = await runWrk({
      url: server.url,
      keysFile,
      // Dated like the levels: a warm-up tag repeated each round re-sent the same e-mails, which
      // dedup answered as updates, and leads_stored fell short of requests_answered after round 1.
      tag: runTag(tagBase, 'warm'),
      seconds: WARMUP_SECONDS,
      connections: CONNECTION_LEVELS[0]!,
      threads: THREADS,
    })
    const levels: IngestFigures[] = []
    for (const connections of CONNECTION_LEVELS) {
      log(`${label}: measuring ${SECONDS}s with ${connections} connections`)
      const cpuBefore = cpuJiffies()
      const writesBefore = await databaseWrites(stats)
      const stopDiskProbe = countDiskStalls()
      const result: WrkResult = await runWrk({
        url: server.url,
        keysFile,
        tag: runTag(tagBase, `c${connections}`),
        seconds: SECONDS,
        connections,
        threads: THREADS,
      })
      // A non-2xx answer (a 429 from a key over its limit, say) is cheaper than a lead and would
      // flatter the figure; such a level is kept in the output but never counts as the throughput.
      levels.push({
        ...result,
        connections,
        peakRssMb: megabytes(server.peakRssBytes()),
        ...cpuShares(cpuBefore, cpuJiffies()),
        ...stopDiskProbe(),
        ...(await writesPerRequest(stats, writesBefore, result.requests)),
      })
    }
    await afterLoad?.()
    const counted = levels.filter((level) => level.non2xx === 0 && level.socketErrors === 0)
    if (counted.length === 0) throw new Error(`${label}: every level had errors or non-2xx answers`)
    const best = counted.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a))
    const answered = [warm, ...levels].reduce((sum, run) => sum + run.requests - run.non2xx, 0)
    return { ...best, peakRssMb: megabytes(server.peakRssBytes()), levels, answered }
  } finally {
    await stats.end()
    await server.stop()
  }
}

/** The level's database writes per request, or nothing where the server has no such counters. */
async function writesPerRequest(
  stats: postgres.Sql,
  before: DatabaseWrites | null,
  requests: number,
): Promise<{ databaseWrites?: DatabaseWritesPerRequest }> {
  const after = before ? await databaseWrites(stats) : null
  return before && after ? { databaseWrites: databaseWritesPerRequest(before, after, requests) } : {}
}

/** A database of the benchmark: its URL and a file with one source key per line (wrk's input). */
export interface BenchDatabase {
  databaseUrl: string
  keysFile: string
  /** The organization of the sources, where addKeySet adds more. */
  organizationId?: string
}

// BENCH_DATABASE: engineers sharing one PostgreSQL each bench on their own database.
const BENCH_DATABASE = process.env.BENCH_DATABASE ?? 'lead_capture_bench'

/**
 * A fresh database with SOURCES sources; returns its URL and a file with one key per line.
 * `suffix` and `cwd`: a second database, made by another checkout's CLI (a baseline's).
 */
export async function prepareBenchDatabase(
  suffix = '',
  cwd?: string,
): Promise<BenchDatabase & { keys: string[] }> {
  const name = suffix ? `${BENCH_DATABASE}_${suffix}` : BENCH_DATABASE
  const databaseUrl = await freshDatabase(name)
  log(`provisioning ${SOURCES} sources with the CLI${cwd ? ` of ${cwd}` : ''} in ${name}`)
  const { organizationId, keys } = await provisionOrganization(databaseUrl, SOURCES, cwd)
  const keysFile = join(ROOT, `bench/results/keys${suffix ? `-${suffix}` : ''}.tmp`)
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { databaseUrl, keysFile, organizationId, keys }
}

/**
 * SOURCES more sources in the benchmark's database and organization, for one service contender.
 * The per-key limit (60 a minute) lives in the database, so a service run spends the budget of the
 * keys it sends to for the next minute: on one key set for every service, a fast contender right
 * after another service exhausted it (10,000 keys × 60 = 600,000 accepted requests a minute over
 * both runs) and was answered 429 for the rest of its run. That was `service [bunsql]`'s failed
 * first round of 2026-11-24 (docs/benchmarks.md, "The bunsql failures").
 */
export async function addKeySet(database: BenchDatabase, name: string): Promise<BenchDatabase> {
  if (!database.organizationId) throw new Error('addKeySet: the database has no organization id')
  const slug = name.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '')
  log(`provisioning ${SOURCES} sources of its own for ${name}`)
  const keys = await addSources(database.databaseUrl, database.organizationId, SOURCES, `bench ${slug}`)
  const keysFile = join(ROOT, `bench/results/keys-${slug}.tmp`)
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { ...database, keysFile }
}

/**
 * BENCH_ORDER: `rotate` (the default: round r starts with the r-th contender) or `mirror` (odd rounds
 * in the given order, even rounds reversed: A B C D, D C B A…), which on a server that slows over a
 * run gives every pair of contenders both positions in every two rounds (use an even BENCH_ROUNDS).
 */
const ORDER = (process.env.BENCH_ORDER ?? 'rotate') as 'rotate' | 'mirror'
if (ORDER !== 'rotate' && ORDER !== 'mirror') throw new Error(`BENCH_ORDER: rotate or mirror, not ${ORDER}`)
// BENCH_CHECKPOINT_BETWEEN=1: a CHECKPOINT before each contender's run, so none starts with the
// dirty buffers and the WAL of the one before it (an endpoint's drain writes for minutes).
const CHECKPOINT_BETWEEN = process.env.BENCH_CHECKPOINT_BETWEEN === '1'

/** The contenders in the order of round `round` (1-based): rotated or mirrored (BENCH_ORDER). */
export function roundOrder<T>(
  contenders: readonly T[],
  round: number,
  order: 'rotate' | 'mirror' = ORDER,
): T[] {
  if (order === 'mirror') return round % 2 === 1 ? [...contenders] : [...contenders].reverse()
  return contenders.map((_, index) => contenders[(index + round - 1) % contenders.length]!)
}

/**
 * Service contenders without a database of their own (a baseline has one) get a key set of their
 * own (addKeySet); the handlers keep the shared one, they count no limit.
 */
export async function giveServicesOwnKeys(
  contenders: Contender[],
  newKeySet: (name: string) => Promise<BenchDatabase>,
): Promise<Contender[]> {
  const result: Contender[] = []
  for (const contender of contenders)
    result.push(
      contender.kind === 'service' && !contender.database
        ? { ...contender, database: await newKeySet(contender.name) }
        : contender,
    )
  return result
}

/**
 * With BENCH_ORDER=mirror the first contender ends every even round and starts the next odd one (and
 * the last contender the reverse): two runs back to back, the second on keys whose minute the first
 * has just spent. A12 (2026-11-26) lost two levels of the service's round 3 to 429s that way. So in
 * mirrored order every service contender whose database this checkout made gets a second key set in
 * the same database (`newKeySet`), used in even rounds (databaseOfRound): every service alike, so
 * the variants compared keep equal databases. A baseline's database is its own commit's; it gets
 * none (the first and last contenders are never baselines: variants come first, handlers last).
 */
export async function giveEvenRoundsOwnKeys(
  contenders: Contender[],
  newKeySet: (contender: Contender) => Promise<BenchDatabase>,
  order: 'rotate' | 'mirror' = ORDER,
): Promise<Contender[]> {
  if (order !== 'mirror') return contenders
  const result: Contender[] = []
  for (const contender of contenders)
    result.push(
      contender.kind === 'service' && contender.database && !contender.checkout
        ? { ...contender, evenRounds: await newKeySet(contender) }
        : contender,
    )
  return result
}

/** The database and key set a contender runs on in round `round` (1-based); none: the shared one. */
export function databaseOfRound(contender: Contender, round: number): BenchDatabase | undefined {
  return round % 2 === 0 && contender.evenRounds ? contender.evenRounds : contender.database
}

/**
 * The fewest runs of other contenders between two runs of service contenders on one key set, over
 * `rounds` rounds (Infinity when no key set is used twice). A run lasts the warm-up and every level
 * (R = 32 s by default); a minute of the limit's window that spans the end of one run on a key set
 * and the start of the next holds at most 60 s − gap of their requests, no more than one run's
 * (which stays under 60 a key up to ~19,000 req/s, WARMUP_SECONDS above) when gap ≥ 60 s − R: one
 * run in between does it for R ≥ 30 s, none (two services back to back) does not.
 */
export function fewestRunsBetweenKeyReuse(
  contenders: readonly Contender[],
  rounds: number,
  sharedKeysFile: string,
  order: 'rotate' | 'mirror' = ORDER,
): number {
  const lastUse = new Map<string, number>()
  let fewest = Number.POSITIVE_INFINITY
  let position = 0
  for (let round = 1; round <= rounds; round++) {
    for (const contender of roundOrder(contenders, round, order)) {
      if (contender.kind === 'service') {
        const database = databaseOfRound(contender, round)
        const keySet = `${database?.databaseUrl ?? ''} ${database?.keysFile ?? sharedKeysFile}`
        const last = lastUse.get(keySet)
        if (last !== undefined) fewest = Math.min(fewest, position - last - 1)
        lastUse.set(keySet, position)
      }
      position++
    }
  }
  return fewest
}

/** The yardsticks every service contender is divided by. */
export const HANDLERS = ['postgres.js handler', 'Bun.sql handler'] as const
export type Handler = (typeof HANDLERS)[number]

/** One server of the benchmark: a service (a variant, a baseline commit) or a least-work handler. */
export interface Contender {
  name: string
  kind: 'service' | 'handler'
  /** A service that runs with the benchmark's webhook endpoint enabled. */
  webhookEndpoint?: boolean
  /** A database of its own (a baseline's); the others share the benchmark's. */
  database?: BenchDatabase
  /** The same database's second key set, for the even rounds (giveEvenRoundsOwnKeys). */
  evenRounds?: BenchDatabase
  /** A baseline commit's checkout: its own CLI made its database, so this one adds no sources there. */
  checkout?: string
  start(databaseUrl: string): ReturnType<typeof spawnServer>
}

/** Everything a run of the benchmark varies, from the command line; the defaults are issue [7]'s method. */
export interface IngestPlan {
  contenders: Contender[]
  /** Run before each service contender starts (the endpoint's outbox reset and enabled flag). */
  beforeService?: (contender: Contender) => Promise<void>
  /** Run after a service contender's load, before it stops (waits for its outbox to drain). */
  drain?: (label: string) => Promise<void>
  /** Run after each service contender stops (the `--endpoint` delivery count). */
  afterService?: () => Promise<Record<string, number>>
}

const spawnOptions = (cwd?: string): SpawnOptions => ({ cwd, replicas: REPLICAS })

function serviceContender(
  name: string,
  env: Record<string, string>,
  cwd?: string,
  webhookEndpoint = false,
  database?: BenchDatabase,
): Contender {
  return {
    name,
    kind: 'service',
    webhookEndpoint,
    database,
    checkout: cwd,
    start: (databaseUrl) =>
      spawnService({ DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE, ...env }, spawnOptions(cwd)),
  }
}

export function handlerContender(name: Handler): Contender {
  const driver = name === 'Bun.sql handler' ? 'bun-sql' : 'postgres.js'
  return {
    name,
    kind: 'handler',
    start: (databaseUrl) =>
      spawnServer(
        ['bun', 'bench/reference-server.ts'],
        { DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE, REFERENCE_DRIVER: driver },
        '/',
        { ...spawnOptions(), readyLine: /listening on/ },
      ),
  }
}

/** Issue [7]'s method: the service and both handlers. */
export function defaultPlan(): IngestPlan {
  return { contenders: [serviceContender('service', {}), ...HANDLERS.map(handlerContender)] }
}

/**
 * A loopback receiver answering 200 and one endpoint subscribed to `lead.created`: every service
 * contender then writes the outbox in ingest_leads() and delivers. Before each service starts the
 * outbox is emptied, so no contender delivers another's backlog. After its load the service keeps
 * running until its outbox is drained (inbound first, docs/webhooks.md: a saturated replica sends
 * lead events at a floor rate and the rest once the load is gone); how long that took, the
 * deliveries received and the distinct `webhook-id`s among them are printed with its run.
 */
async function withEndpoint(databaseUrls: string[]): Promise<{
  env: Record<string, string>
  beforeService(contender: Contender): Promise<void>
  drain(label: string): Promise<void>
  afterService(): Promise<Record<string, number>>
  close(): Promise<void>
}> {
  let received = 0
  const messageIds = new Set<string>()
  let drainMs = 0
  let pendingAtLoadEnd = 0
  let drained = true
  const receiver = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      await request.arrayBuffer()
      received++
      messageIds.add(request.headers.get('webhook-id') ?? '')
      return new Response('ok')
    },
  })
  const connections = new Map(
    databaseUrls.map((url) => [url, postgres(url, { max: 1, onnotice: () => {} })] as const),
  )
  for (const sql of connections.values())
    await addWebhookEndpoint(sql, `http://127.0.0.1:${receiver.port}/hook`)
  // The endpoint's database of the contender running now; none for a baseline without `--endpoint`.
  let current: postgres.Sql | undefined
  // The backlog's shape differs by commit (a baseline runs its own migrations): see outboxBacklog.
  const backlogs = new Map<postgres.Sql, OutboxBacklog>()
  const backlogOf = async (sql: postgres.Sql) => {
    if (!backlogs.has(sql)) backlogs.set(sql, await outboxBacklog(sql))
    return backlogs.get(sql)!
  }
  const pending = async (sql: postgres.Sql) => (await backlogOf(sql)).count()
  return {
    env: { ...BENCH_WEBHOOK_ENV },
    async beforeService(contender) {
      current = connections.get(contender.database?.databaseUrl ?? databaseUrls[0]!)
      received = 0
      messageIds.clear()
      drainMs = 0
      pendingAtLoadEnd = 0
      drained = true
      if (!current) return
      await (await backlogOf(current)).clear()
      await current`update webhook_endpoints set enabled = ${contender.webhookEndpoint === true}`
    },
    async drain(label) {
      if (!current) return
      const started = performance.now()
      pendingAtLoadEnd = await pending(current)
      let left = pendingAtLoadEnd
      while (left > 0 && performance.now() - started < DRAIN_TIMEOUT_SECONDS * 1000) {
        await Bun.sleep(100)
        left = await pending(current)
      }
      drainMs = Math.round(performance.now() - started)
      drained = left === 0
      log(
        `${label}: ${pendingAtLoadEnd} events pending (deliveries, and messages not fanned out) when the load stopped, ${drained ? `drained in ${round(drainMs / 1000, 1)} s` : `${left} still pending after ${DRAIN_TIMEOUT_SECONDS} s`}`,
      )
    },
    async afterService(): Promise<Record<string, number>> {
      if (!current) return {}
      return {
        deliveries_received: received,
        distinct_webhook_ids: messageIds.size,
        deliveries_pending_at_load_end: pendingAtLoadEnd,
        drain_ms: drainMs,
        deliveries_pending_at_stop: await pending(current),
      }
    },
    async close() {
      receiver.stop(true)
      for (const sql of connections.values()) await sql.end()
    },
  }
}

/** The medians of one connection level over the rounds, for every server, and the services' ratios. */
export interface IngestLevel {
  connections: number
  figures: Record<string, IngestFigures>
  /** The `service` contender's requests/s over each handler's, at this level. */
  ratios: Record<Handler, number>
  /** Every service contender's requests/s over each handler's, at this level. */
  serviceRatios: Record<string, Record<Handler, number>>
}

export interface IngestResult {
  best: Record<string, IngestFigures>
  /** The `service` contender's best level against each handler's best level. */
  ratios: Record<Handler, number>
  /** Every service contender's best level against each handler's best level. */
  serviceRatios: Record<string, Record<Handler, number>>
  levels: IngestLevel[]
  runs: Record<string, IngestRun[]>
  replicas: number
}

/**
 * Every contender one after another in each of ROUNDS rounds (the order rotates per round, so
 * none gains from always running later), each run on a new process with the same warm-up; the
 * figures are the medians (this machine's throughput drifts by a third between single runs, so one
 * run of each proves nothing). Every run is kept in `runs`; `levels` gives the medians and ratios at
 * each connection count, `best` each server's median best level and `serviceRatios` each service's
 * best level against each handler's best level.
 */
export async function runIngestBenchmark(
  databaseUrl: string,
  keysFile: string,
  plan: IngestPlan = defaultPlan(),
): Promise<IngestResult> {
  const { contenders } = plan
  const names = contenders.map((contender) => contender.name)
  const runs = Object.fromEntries(names.map((name) => [name, [] as IngestRun[]]))
  // A 2xx is not a stored lead (an invalid e-mail is answered 200 as missing_contact): each service
  // run reports the leads it stored against the requests wrk counted (warm-up included).
  const connections = new Map<string, postgres.Sql>()
  const connection = (url: string) => {
    const sql = connections.get(url) ?? postgres(url, { max: 1, onnotice: () => {} })
    connections.set(url, sql)
    return sql
  }
  const leadCount = async (url: string) =>
    (await connection(url)`select count(*)::int as n from leads`)[0]!.n as number
  // wrk counts non-2xx answers but not their statuses, and a response hook in its script would cost
  // its one thread time on every answer (and so change the figures). The service logs every POST
  // with its status (delivery_logs, floods of 429 as one row with a repeat_count), so a run's
  // statuses are read there afterwards: only one contender runs at a time and the handlers write
  // no delivery log, so every row since the run's start is its own.
  const databaseNow = async (url: string) => (await connection(url)`select now() as now`)[0]!.now as Date
  const answersSince = async (url: string, since: Date): Promise<Record<string, number>> => {
    try {
      const rows = await connection(url)`select http_status, sum(repeat_count)::int as n
        from delivery_logs where received_at >= ${since} group by http_status order by http_status`
      return Object.fromEntries(rows.map((row) => [`status_${row.http_status}`, row.n as number]))
    } catch (error) {
      // A baseline from before delivery_logs.repeat_count: no breakdown, the run still counts.
      log(`no status breakdown: ${(error as Error).message}`)
      return {}
    }
  }
  const fewest = fewestRunsBetweenKeyReuse(contenders, ROUNDS, keysFile)
  const runSeconds = WARMUP_SECONDS + CONNECTION_LEVELS.length * SECONDS
  if ((fewest + 1) * runSeconds < 60)
    log(
      `warning: a key set is used again ${fewest} run(s) of ~${runSeconds} s later, inside the per-key limit's minute: expect 429s (give each service a key set of its own)`,
    )
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS}`)
      const order = roundOrder(contenders, round)
      for (const contender of order) {
        const isService = contender.kind === 'service'
        const database = databaseOfRound(contender, round) ?? { databaseUrl, keysFile }
        if (CHECKPOINT_BETWEEN) {
          await connection(databaseUrl)`checkpoint`
          log(`checkpoint before ${contender.name}`)
        }
        if (isService) await plan.beforeService?.(contender)
        const leadsBefore = isService ? await leadCount(database.databaseUrl) : 0
        const startedAt = isService ? await databaseNow(database.databaseUrl) : null
        const run = await measure(
          contender.name,
          () => contender.start(database.databaseUrl),
          database.keysFile,
          isService && plan.drain ? () => plan.drain!(contender.name) : undefined,
        )
        if (isService) {
          const leadsStored = (await leadCount(database.databaseUrl)) - leadsBefore
          const deliveries = await plan.afterService?.()
          run.extra = {
            requests_answered: run.answered,
            leads_stored: leadsStored,
            ...(await answersSince(database.databaseUrl, startedAt!)),
            ...deliveries,
          }
          // Every lead created has its one lead.created event: each arrived, and none twice.
          if (contender.webhookEndpoint && deliveries)
            run.extra.every_event_delivered_once =
              deliveries.distinct_webhook_ids === leadsStored &&
              deliveries.deliveries_received === leadsStored &&
              deliveries.deliveries_pending_at_stop === 0
        }
        runs[contender.name]!.push(run)
      }
    }
  } finally {
    for (const sql of connections.values()) await sql.end()
  }
  const best = Object.fromEntries(names.map((name) => [name, medianRun(runs[name]!)]))
  const services = contenders.filter((contender) => contender.kind === 'service').map((c) => c.name)
  const ratiosOf = (figures: Record<string, IngestFigures>) =>
    Object.fromEntries(
      services.map((service) => [
        service,
        // A run without handlers (--services-only) has no ratios to them.
        Object.fromEntries(
          HANDLERS.filter((handler) => figures[handler]).map((handler) => [
            handler,
            round(figures[service]!.requestsPerSecond / figures[handler]!.requestsPerSecond, 3),
          ]),
        ) as Record<Handler, number>,
      ]),
    )
  const levels = CONNECTION_LEVELS.map((connections, index): IngestLevel => {
    const figures = Object.fromEntries(
      names.map((name) => [name, medianRun(runs[name]!.map((run) => run.levels[index]!))]),
    )
    const serviceRatios = ratiosOf(figures)
    return {
      connections,
      figures,
      ratios: serviceRatios.service ?? serviceRatios[services[0]!]!,
      serviceRatios,
    }
  })
  const serviceRatios = ratiosOf(best)
  return {
    best,
    ratios: serviceRatios.service ?? serviceRatios[services[0]!]!,
    serviceRatios,
    levels,
    runs,
    replicas: REPLICAS,
  }
}

/** The run with the median throughput, its peak RSS replaced by the highest seen. */
function medianRun(runs: IngestFigures[]): IngestFigures {
  return {
    ...medianBy(runs, (run) => run.requestsPerSecond),
    peakRssMb: Math.max(...runs.map((run) => run.peakRssMb)),
  }
}

export function printIngest(result: IngestResult): void {
  const row = (name: string, figures: IngestFigures) =>
    `${name.padEnd(36)} ${String(figures.connections).padStart(4)} conn ${String(round(figures.requestsPerSecond, 0)).padStart(7)} req/s   p50 ${String(round(figures.p50Ms)).padStart(6)} ms   p99 ${String(round(figures.p99Ms)).padStart(6)} ms   peak RSS ${String(figures.peakRssMb).padStart(6)} MB   non-2xx ${figures.non2xx}   idle ${figures.idlePct}%   steal ${figures.stealPct}%   ${describeDiskStalls(figures)}   ${describeDatabaseWrites(figures.databaseWrites)}`
  for (const [name, runs] of Object.entries(result.runs)) {
    for (const [index, run] of runs.entries()) {
      for (const level of run.levels) console.log(row(`${name} #${index + 1}`, level))
      if (run.extra) console.log(`${name} #${index + 1}: ${JSON.stringify(run.extra)}`)
    }
  }
  if (result.replicas > 1) console.log(`\n${result.replicas} processes per contender (SO_REUSEPORT)`)
  console.log(
    '\n| connections | server | req/s (rounds) | p99 ms | ratio to postgres.js handler | ratio to Bun.sql handler |',
  )
  console.log('|---|---|---|---|---|---|')
  const perRound = (name: string, index: number | null) =>
    result.runs[name]!.map((run) =>
      round((index === null ? run : run.levels[index]!).requestsPerSecond, 0),
    ).join(' / ')
  const lines = (
    label: string,
    figures: Record<string, IngestFigures>,
    ratios: IngestResult['serviceRatios'],
    index: number | null,
  ) => {
    for (const [name, value] of Object.entries(figures)) {
      const ratio = ratios[name]
      console.log(
        `| ${label} | ${name} | ${round(value.requestsPerSecond, 0)} (${perRound(name, index)}) | ${round(value.p99Ms)} | ${ratio?.['postgres.js handler'] ?? ''} | ${ratio?.['Bun.sql handler'] ?? ''} |`,
      )
    }
  }
  result.levels.forEach((level, index) => {
    lines(String(level.connections), level.figures, level.serviceRatios, index)
  })
  lines('best level of each', result.best, result.serviceRatios, null)
  console.log(
    '(medians of the rounds, each round in brackets in round order; ratio = service requests/s / handler requests/s)',
  )
}

if (import.meta.main) {
  const plan = defaultPlan()
  const variants = cli['service-variants']
    ?.split(',')
    .map((name) => name.trim())
    .filter(Boolean)
  const cleanups: Array<() => Promise<void>> = []
  try {
    const shared = await prepareBenchDatabase()
    const { databaseUrl, keysFile } = shared
    const baselines = []
    for (const rev of (cli.baseline ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean)) {
      const baseline = await checkoutBaseline(rev)
      cleanups.push(baseline.remove)
      baselines.push({ ...baseline, database: await prepareBenchDatabase(baseline.label, baseline.dir) })
    }
    // A database of its own for every service variant too, made by this checkout's CLI: on one
    // shared database each variant's leads (~250,000 a round) grew the tables the next one wrote
    // to, while a baseline's grew by its own only, which biased old-against-new comparisons.
    const serviceVariants = variants ?? ['default']
    const variantDatabases = new Map<string, BenchDatabase>()
    for (const variant of serviceVariants)
      variantDatabases.set(
        variant,
        await prepareBenchDatabase(`v_${variant.toLowerCase().replace(/[^a-z0-9]+/g, '_')}`),
      )
    let serviceEnv: Record<string, string> = {}
    const endpointVariant = serviceVariants.some(isEndpointVariant)
    if (cli.endpoint || endpointVariant) {
      const endpoint = await withEndpoint([
        ...[...variantDatabases.values()].map((database) => database.databaseUrl),
        ...(cli.endpoint ? baselines.map((baseline) => baseline.database.databaseUrl) : []),
      ])
      cleanups.push(endpoint.close)
      serviceEnv = endpoint.env
      plan.beforeService = endpoint.beforeService
      plan.drain = endpoint.drain
      plan.afterService = endpoint.afterService
    }
    const handlers = cli['services-only']
      ? []
      : plan.contenders.filter((contender) => contender.kind === 'handler')
    const services = serviceVariants.map((variant) =>
      serviceContender(
        variant === 'default' ? 'service' : `service [${variant}]`,
        { ...serviceEnv, ...variantEnv(variant) },
        undefined,
        cli.endpoint || isEndpointVariant(variant),
        variantDatabases.get(variant),
      ),
    )
    for (const baseline of baselines)
      services.push(
        serviceContender(
          `baseline ${baseline.label}`,
          serviceEnv,
          baseline.dir,
          cli.endpoint,
          baseline.database,
        ),
      )
    // Every service has a database and so a key set of its own; addKeySet stays for any that
    // would not (on one shared set a fast service right after another ran out of its keys' 60 a minute).
    plan.contenders = await giveEvenRoundsOwnKeys(
      await giveServicesOwnKeys([...services, ...handlers], (name) => addKeySet(shared, name)),
      (contender) => addKeySet(contender.database!, `${contender.name} even rounds`),
    )
    const result = await runIngestBenchmark(databaseUrl, keysFile, plan)
    printIngest(result)
    // A --quick check never overwrites the committed figures of a measurement.
    const file = join(ROOT, QUICK ? 'bench/results/ingest-quick.tmp' : 'bench/results/ingest.json')
    writeFileSync(
      file,
      `${JSON.stringify({ date: new Date().toISOString(), argv: Bun.argv.slice(2), sources: SOURCES, seconds: SECONDS, rounds: ROUNDS, connection_levels: CONNECTION_LEVELS, ...result }, null, 2)}\n`,
    )
    log(`written ${file}`)
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup()
  }
}
