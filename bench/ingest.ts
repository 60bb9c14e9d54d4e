import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { provisionSources } from './provision'
import {
  freshDatabase,
  log,
  medianBy,
  megabytes,
  ROOT,
  round,
  runWrk,
  spawnServer,
  spawnService,
  type WrkResult,
} from './support'

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
 */
const SOURCES = Number(process.env.BENCH_SOURCES ?? 10_000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
// Long enough for a new process to reach steady state (JIT, pools, every source cached); both servers
// get the same. One process's warm-up plus every level stays below the 60/min of any key: at
// 8 s + 3 x 8 s and 10,000 keys, a key's 60th request in a minute would take ~19,000 req/s.
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTION_LEVELS = (process.env.BENCH_CONNECTIONS ?? '50,100,200')
  .split(',')
  .map((level) => Number(level.trim()))
  .filter((level) => Number.isInteger(level) && level > 0)
if (CONNECTION_LEVELS.length === 0)
  throw new Error('BENCH_CONNECTIONS: give one or more connection counts, e.g. 50,100,200')
const THREADS = Number(process.env.BENCH_THREADS ?? 1)
const POOL_SIZE = String(process.env.BENCH_POOL_SIZE ?? 10)

export interface IngestFigures {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  peakRssMb: number
  requests: number
  non2xx: number
  socketErrors: number
  connections: number
}

/** One process: its best level (the throughput) and every level it was driven at. */
export interface IngestRun extends IngestFigures {
  levels: IngestFigures[]
}

async function measure(
  label: string,
  start: () => ReturnType<typeof spawnServer>,
  keysFile: string,
): Promise<IngestRun> {
  const server = await start()
  try {
    log(`${label}: warm-up ${WARMUP_SECONDS}s`)
    await runWrk({
      url: server.url,
      keysFile,
      tag: `${label}-warm`,
      seconds: WARMUP_SECONDS,
      connections: CONNECTION_LEVELS[0]!,
      threads: THREADS,
    })
    const levels: IngestFigures[] = []
    for (const connections of CONNECTION_LEVELS) {
      log(`${label}: measuring ${SECONDS}s with ${connections} connections`)
      const result: WrkResult = await runWrk({
        url: server.url,
        keysFile,
        tag: `${label}-${connections}-${Date.now()}`,
        seconds: SECONDS,
        connections,
        threads: THREADS,
      })
      // A non-2xx answer (a 429 from a key over its limit, say) is cheaper than a lead and would
      // flatter the figure; such a level is kept in the output but never counts as the throughput.
      levels.push({ ...result, connections, peakRssMb: megabytes(server.peakRssBytes()) })
    }
    const counted = levels.filter((level) => level.non2xx === 0 && level.socketErrors === 0)
    if (counted.length === 0) throw new Error(`${label}: every level had errors or non-2xx answers`)
    const best = counted.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a))
    return { ...best, peakRssMb: megabytes(server.peakRssBytes()), levels }
  } finally {
    await server.stop()
  }
}

/** A fresh database with SOURCES sources; returns its URL and a file with one key per line. */
export async function prepareBenchDatabase(): Promise<{
  databaseUrl: string
  keysFile: string
  keys: string[]
}> {
  // BENCH_DATABASE: engineers sharing one PostgreSQL each bench on their own database.
  const databaseUrl = await freshDatabase(process.env.BENCH_DATABASE ?? 'lead_capture_bench')
  log(`provisioning ${SOURCES} sources with the CLI`)
  const keys = await provisionSources(databaseUrl, SOURCES)
  const keysFile = join(ROOT, 'bench/results/keys.tmp')
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { databaseUrl, keysFile, keys }
}

/** The servers of the benchmark: the service and the two least-work handlers. */
export const CONTENDERS = ['service', 'postgres.js handler', 'Bun.sql handler'] as const
export type Contender = (typeof CONTENDERS)[number]
const HANDLERS = ['postgres.js handler', 'Bun.sql handler'] as const

/** The medians of one connection level over the rounds, for every server, and the service's ratios. */
export interface IngestLevel {
  connections: number
  figures: Record<Contender, IngestFigures>
  /** Service requests/s over each handler's, at this level. */
  ratios: Record<(typeof HANDLERS)[number], number>
}

function start(contender: Contender, databaseUrl: string): ReturnType<typeof spawnServer> {
  const env = { DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE }
  if (contender === 'service') return spawnService(env)
  const driver = contender === 'Bun.sql handler' ? 'bun-sql' : 'postgres.js'
  return spawnServer(['bun', 'bench/reference-server.ts'], { ...env, REFERENCE_DRIVER: driver }, '/')
}

/**
 * The service and both handlers, one after another in each of ROUNDS rounds (the order rotates per
 * round, so none gains from always running later), each run on a new process with the same
 * warm-up; the figures are the medians (this machine's throughput drifts by a third between
 * single runs, so one run of each proves nothing). Every run is kept in `runs`; `levels` gives the
 * medians and ratios at each connection count, `best` each server's median best level and
 * `ratios` the service's best level against each handler's best level.
 */
export async function runIngestBenchmark(
  databaseUrl: string,
  keysFile: string,
): Promise<{
  best: Record<Contender, IngestFigures>
  ratios: Record<(typeof HANDLERS)[number], number>
  levels: IngestLevel[]
  runs: Record<Contender, IngestRun[]>
}> {
  const runs = Object.fromEntries(CONTENDERS.map((name) => [name, [] as IngestRun[]])) as Record<
    Contender,
    IngestRun[]
  >
  for (let round = 1; round <= ROUNDS; round++) {
    log(`round ${round}/${ROUNDS}`)
    const order = CONTENDERS.map((_, index) => CONTENDERS[(index + round - 1) % CONTENDERS.length]!)
    for (const name of order) runs[name].push(await measure(name, () => start(name, databaseUrl), keysFile))
  }
  const best = Object.fromEntries(CONTENDERS.map((name) => [name, medianRun(runs[name])])) as Record<
    Contender,
    IngestFigures
  >
  const ratioTo = (service: IngestFigures, handler: IngestFigures) =>
    round(service.requestsPerSecond / handler.requestsPerSecond, 3)
  const levels = CONNECTION_LEVELS.map((connections, index): IngestLevel => {
    const figures = Object.fromEntries(
      CONTENDERS.map((name) => [name, medianRun(runs[name].map((run) => run.levels[index]!))]),
    ) as Record<Contender, IngestFigures>
    const ratios = Object.fromEntries(
      HANDLERS.map((handler) => [handler, ratioTo(figures.service, figures[handler])]),
    ) as IngestLevel['ratios']
    return { connections, figures, ratios }
  })
  const ratios = Object.fromEntries(
    HANDLERS.map((handler) => [handler, ratioTo(best.service, best[handler])]),
  ) as IngestLevel['ratios']
  return { best, ratios, levels, runs }
}

/** The run with the median throughput, its peak RSS replaced by the highest seen. */
function medianRun(runs: IngestFigures[]): IngestFigures {
  return {
    ...medianBy(runs, (run) => run.requestsPerSecond),
    peakRssMb: Math.max(...runs.map((run) => run.peakRssMb)),
  }
}

export function printIngest(result: Awaited<ReturnType<typeof runIngestBenchmark>>): void {
  const row = (name: string, figures: IngestFigures) =>
    `${name.padEnd(24)} ${String(figures.connections).padStart(4)} conn ${String(round(figures.requestsPerSecond, 0)).padStart(7)} req/s   p50 ${String(round(figures.p50Ms)).padStart(6)} ms   p99 ${String(round(figures.p99Ms)).padStart(6)} ms   peak RSS ${String(figures.peakRssMb).padStart(6)} MB   non-2xx ${figures.non2xx}`
  for (const [name, runs] of Object.entries(result.runs)) {
    for (const [index, run] of runs.entries()) {
      for (const level of run.levels) console.log(row(`${name} #${index + 1}`, level))
    }
  }
  console.log('\n| connections | service | postgres.js handler (ratio) | Bun.sql handler (ratio) |')
  console.log('|---|---|---|---|')
  const cell = (figures: IngestFigures, ratio?: number) =>
    `${round(figures.requestsPerSecond, 0)}${ratio === undefined ? '' : ` (${ratio})`}`
  for (const level of result.levels) {
    console.log(
      `| ${level.connections} | ${cell(level.figures.service)} | ${cell(level.figures['postgres.js handler'], level.ratios['postgres.js handler'])} | ${cell(level.figures['Bun.sql handler'], level.ratios['Bun.sql handler'])} |`,
    )
  }
  console.log(
    `| best level of each | ${cell(result.best.service)} | ${cell(result.best['postgres.js handler'], result.ratios['postgres.js handler'])} | ${cell(result.best['Bun.sql handler'], result.ratios['Bun.sql handler'])} |`,
  )
  console.log('(medians of the rounds; ratio = service requests/s / handler requests/s)')
}

if (import.meta.main) {
  const { databaseUrl, keysFile } = await prepareBenchDatabase()
  const result = await runIngestBenchmark(databaseUrl, keysFile)
  printIngest(result)
  const file = join(ROOT, 'bench/results/ingest.json')
  writeFileSync(
    file,
    `${JSON.stringify({ date: new Date().toISOString(), sources: SOURCES, seconds: SECONDS, connection_levels: CONNECTION_LEVELS, ...result }, null, 2)}\n`,
  )
  log(`written ${file}`)
}
