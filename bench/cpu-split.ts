import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { provisionSources } from './provision'
import {
  addWebhookEndpoint,
  BENCH_WEBHOOK_ENV,
  checkoutBaseline,
  cpuJiffies,
  cpuShares,
  freshDatabase,
  log,
  medianBy,
  outboxBacklog,
  parseEnvAssignments,
  ROOT,
  type RunningProcess,
  round,
  runTag,
  runWrk,
  spawnServer,
  spawnService,
} from './support'

/**
 * `bun run bench:cpu-split [--baseline <rev>] [--env NAME=value+NAME=value] [--endpoint] [--pairs 3]`: where the
 * CPU of one request goes, per process, for the service and the least-work `Bun.sql` handler
 * (bench/reference-server.ts) at the same fixed loads (wrk at each of BENCH_CONNECTIONS, default
 * 50,100, for BENCH_SECONDS, default 8, after a 3 s warm-up), in alternating runs (A B B A A B …).
 *
 * On 2 cores wrk, Bun and PostgreSQL share the CPU, so throughput at saturation is bounded by the
 * total CPU per request over all processes; this prints that total and its parts: the server
 * process (utime + stime of /proc/PID/stat), the PostgreSQL backends connected to its database
 * (pg_stat_activity), every other PostgreSQL process (WAL writer, checkpointer, autovacuum, and
 * other engineers' databases on a shared machine: read it as noise), redis-server, wrk (its
 * rusage), and the transactions committed per 1,000 requests. Every contender has a database of
 * its own (BENCH_DATABASE, default lead_capture_bench_cpu, + a suffix) with BENCH_SOURCES sources.
 *
 * `--endpoint` adds the service with one webhook endpoint subscribed to `lead.created` (issue [6]'s
 * one-endpoint case), its receiver in this process on loopback answering 200; this process's own CPU
 * is then the `receiver` column (it does nothing else while wrk runs). Pending deliveries are
 * deleted before each of its runs, so no run delivers another's backlog. `--endpoint-env
 * NAME=value+…` (repeatable) adds that service again with more environment, same database.
 */
const cli = parseArgs({
  options: {
    baseline: { type: 'string' },
    env: { type: 'string', multiple: true },
    pairs: { type: 'string' },
    'no-handler': { type: 'boolean' },
    endpoint: { type: 'boolean' },
    'endpoint-env': { type: 'string', multiple: true },
  },
  allowPositionals: true,
}).values
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const LEVELS = (process.env.BENCH_CONNECTIONS ?? '50,100').split(',').map(Number)
const PAIRS = Number(cli.pairs ?? 3)
const POOL_SIZE = String(process.env.BENCH_POOL_SIZE ?? 10)
/** 20,000 keys: a service run sends ~10 requests per key, so two runs in a minute stay under 60. */
const SOURCES = Number(process.env.BENCH_SOURCES ?? 20_000)
const DATABASE = process.env.BENCH_DATABASE ?? 'lead_capture_bench_cpu'
const TICK_MS = 1000 / 100
const CHUNK = 500

function cpuMs(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    // utime and stime, fields 14 and 15 of stat(5), in clock ticks (USER_HZ, 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch {
    return null
  }
}

/** CPU ms of every process whose command is `comm` (postgres, redis-server). */
function cpuByComm(comm: string): Map<number, number> {
  const result = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== comm) continue
    } catch {
      continue
    }
    const ms = cpuMs(Number(entry))
    if (ms !== null) result.set(Number(entry), ms)
  }
  return result
}

function delta(before: Map<number, number>, after: Map<number, number>, pids?: Set<number>, exclude = false) {
  let sum = 0
  for (const [pid, ms] of after) {
    if (pids && pids.has(pid) === exclude) continue
    sum += ms - (before.get(pid) ?? ms)
  }
  return sum
}

interface Contender {
  name: string
  databaseUrl: string
  databaseName: string
  keysFile: string
  start(): Promise<RunningProcess>
}

interface Figures {
  level: number
  rps: number
  requests: number
  non2xx: number
  server: number
  backends: number
  postgresOther: number
  redis: number
  wrk: number
  /** This process: the `--endpoint` receiver (nothing else runs here during a level). */
  receiver: number
  total: number
  /** Share of the machine's CPU time left idle during the level, %. */
  idlePct: number
  /** Share of it the hypervisor gave to other machines during the level, %. */
  stealPct: number
}

async function measure(contender: Contender, run: number): Promise<Figures[]> {
  const server = await contender.start()
  const admin = postgres(contender.databaseUrl, { max: 1, onnotice: () => {} })
  const figures: Figures[] = []
  try {
    const wrk = { url: server.url, keysFile: contender.keysFile, threads: 1 }
    await runWrk({
      ...wrk,
      connections: LEVELS[0]!,
      tag: runTag(`${contender.name.replace(/\W+/g, '-')}-warm`, String(run)),
      seconds: 3,
    })
    for (const level of LEVELS) {
      const serverBefore = cpuMs(server.pid)!
      const machineBefore = cpuJiffies()
      const pgBefore = cpuByComm('postgres')
      const redisBefore = cpuByComm('redis-server')
      const selfBefore = process.cpuUsage()
      const result = await runWrk({
        ...wrk,
        connections: level,
        tag: runTag(`${contender.name.replace(/\W+/g, '-')}-${level}`, String(run)),
        seconds: SECONDS,
      })
      const selfUsage = process.cpuUsage(selfBefore)
      const serverMs = cpuMs(server.pid)! - serverBefore
      const machineAfter = cpuJiffies()
      const pgAfter = cpuByComm('postgres')
      const redisAfter = cpuByComm('redis-server')
      const backendPids = new Set(
        (
          await admin`select pid from pg_stat_activity where datname = ${contender.databaseName} and pid <> pg_backend_pid()`
        ).map((row) => Number(row.pid)),
      )
      const us = (ms: number) => round((ms * 1000) / result.requests, 1)
      const f: Figures = {
        level,
        rps: Math.round(result.requestsPerSecond),
        requests: result.requests,
        non2xx: result.non2xx + result.socketErrors,
        server: us(serverMs),
        backends: us(delta(pgBefore, pgAfter, backendPids)),
        postgresOther: us(delta(pgBefore, pgAfter, backendPids, true)),
        redis: us(delta(redisBefore, redisAfter)),
        wrk: us(result.cpuMs),
        receiver: us((selfUsage.user + selfUsage.system) / 1000),
        total: 0,
        ...cpuShares(machineBefore, machineAfter),
      }
      f.total = round(f.server + f.backends + f.postgresOther + f.redis + f.wrk + f.receiver, 1)
      log(`run ${run} ${contender.name} @${level}: ${JSON.stringify(f)}`)
      figures.push(f)
    }
    return figures
  } finally {
    await admin.end()
    await server.stop()
  }
}

async function benchDatabase(suffix: string, cwd?: string) {
  const databaseName = `${DATABASE}_${suffix}`
  const databaseUrl = await freshDatabase(databaseName)
  log(`provisioning ${SOURCES} sources in ${databaseName}${cwd ? ` with the CLI of ${cwd}` : ''}`)
  const keys: string[] = []
  while (keys.length < SOURCES) keys.push(...(await provisionSources(databaseUrl, CHUNK, cwd)))
  const keysFile = join(ROOT, `bench/results/keys-${databaseName}.tmp`)
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { databaseName, databaseUrl, keysFile }
}

const cleanups: Array<() => Promise<unknown>> = []
const baseline = cli.baseline ? await checkoutBaseline(cli.baseline) : null
try {
  const contenders: Contender[] = []
  const here = await benchDatabase('here')
  contenders.push({
    name: 'service',
    ...here,
    start: () => spawnService({ DATABASE_URL: here.databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE }),
  })
  for (const [index, spec] of (cli.env ?? []).entries()) {
    const env = parseEnvAssignments(spec)
    const db = await benchDatabase(`env${index}`)
    contenders.push({
      name: `service [${spec}]`,
      ...db,
      start: () => spawnService({ DATABASE_URL: db.databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE, ...env }),
    })
  }
  if (cli.endpoint) {
    const db = await benchDatabase('endpoint')
    const receiver = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(request) {
        await request.arrayBuffer()
        return new Response('ok')
      },
    })
    cleanups.push(async () => {
      receiver.stop(true)
    })
    const admin = postgres(db.databaseUrl, { max: 1, onnotice: () => {} })
    cleanups.push(() => admin.end())
    await addWebhookEndpoint(admin, `http://127.0.0.1:${receiver.port}/hook`)
    // `--endpoint-env NAME=value+…` (repeatable): the endpoint's service again with more environment,
    // on the same database and endpoint (each run starts with the backlog cleared).
    for (const spec of ['', ...(cli['endpoint-env'] ?? [])]) {
      const env = spec ? parseEnvAssignments(spec) : {}
      contenders.push({
        name: spec ? `service [endpoint+${spec}]` : 'service [endpoint]',
        ...db,
        start: async () => {
          await (await outboxBacklog(admin)).clear()
          return spawnService({
            DATABASE_URL: db.databaseUrl,
            DATABASE_POOL_SIZE: POOL_SIZE,
            ...BENCH_WEBHOOK_ENV,
            ...env,
          })
        },
      })
    }
  }
  if (baseline) {
    const db = await benchDatabase(`b${baseline.label}`, baseline.dir)
    contenders.push({
      name: `baseline ${baseline.label}`,
      ...db,
      start: () =>
        spawnService({ DATABASE_URL: db.databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE }, { cwd: baseline.dir }),
    })
  }
  if (!cli['no-handler']) {
    contenders.push({
      name: 'Bun.sql handler',
      ...here,
      start: () =>
        spawnServer(
          ['bun', 'bench/reference-server.ts'],
          { DATABASE_URL: here.databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE, REFERENCE_DRIVER: 'bun-sql' },
          '/',
          { readyLine: /listening on/ },
        ),
    })
  }
  const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  log(`load average at the start: ${loadavg()}`)
  const results = new Map<string, Figures[][]>(contenders.map((c) => [c.name, []]))
  let run = 0
  // A B B A A B (with more contenders: the order reversed every other pass).
  for (let pass = 0; pass < PAIRS; pass++) {
    const order = pass % 2 === 0 ? contenders : [...contenders].reverse()
    for (const contender of order) results.get(contender.name)!.push(await measure(contender, ++run))
  }
  log(`load average at the end: ${loadavg()}`)
  const keys = [
    'rps',
    'server',
    'backends',
    'postgresOther',
    'redis',
    'wrk',
    'receiver',
    'total',
    'idlePct',
    'stealPct',
  ] as const
  console.log(`| level | contender | ${keys.join(' | ')} | non-2xx |`)
  console.log(`|${' --- |'.repeat(keys.length + 3)}`)
  for (const level of LEVELS) {
    for (const [name, runs] of results) {
      const atLevel = runs.map((figures) => figures.find((f) => f.level === level)!)
      const cells = keys.map((key) => {
        const median = medianBy(atLevel, (f) => f[key])[key]
        return `${median} (${atLevel.map((f) => f[key]).join(' / ')})`
      })
      console.log(`| ${level} | ${name} | ${cells.join(' | ')} | ${atLevel.map((f) => f.non2xx).join('/')} |`)
    }
  }
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup()
  await baseline?.remove()
}
