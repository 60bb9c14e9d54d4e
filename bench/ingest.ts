import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { provisionSources } from './provision'
import {
  freshDatabase,
  log,
  medianBy,
  megabytes,
  REDIS_URL,
  ROOT,
  round,
  runWrk,
  spawnServer,
  type WrkResult,
} from './support'

/**
 * `bun run bench:ingest`: the inbound endpoint against a minimal reference handler (Bun.serve +
 * postgres.js, one INSERT per request), same payload, same wrk settings, same PostgreSQL. Every
 * request carries a distinct e-mail, spread over SOURCES keys, so every request creates a lead and
 * no key reaches its 60/min limit. Prints requests/s, p50/p99 and peak RSS of both and the ratio.
 */
const SOURCES = Number(process.env.BENCH_SOURCES ?? 5000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
// Long enough for a new process to reach steady state (JIT, pools, every source cached); both servers
// get the same. Warm-up plus measurement stay far below the 60/min of any key.
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
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
}

async function measure(
  label: string,
  command: string[],
  env: Record<string, string>,
  readyPath: string,
  keysFile: string,
): Promise<IngestFigures> {
  const server = await spawnServer(command, env, readyPath)
  try {
    log(`${label}: warm-up ${WARMUP_SECONDS}s`)
    await runWrk({
      url: server.url,
      keysFile,
      tag: `${label}-warm`,
      seconds: WARMUP_SECONDS,
      connections: CONNECTIONS,
      threads: THREADS,
    })
    log(`${label}: measuring ${SECONDS}s with ${CONNECTIONS} connections`)
    const result: WrkResult = await runWrk({
      url: server.url,
      keysFile,
      tag: `${label}-${Date.now()}`,
      seconds: SECONDS,
      connections: CONNECTIONS,
      threads: THREADS,
    })
    return { ...result, peakRssMb: megabytes(server.peakRssBytes()) }
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
  const databaseUrl = await freshDatabase('lead_capture_bench')
  log(`provisioning ${SOURCES} sources with the CLI`)
  const keys = await provisionSources(databaseUrl, SOURCES)
  const keysFile = join(ROOT, 'bench/results/keys.tmp')
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { databaseUrl, keysFile, keys }
}

/**
 * Service and reference alternate for ROUNDS rounds, each run on a new process with the same
 * warm-up; the figures are the medians (this machine's throughput drifts by a third between
 * single runs, so one run of each proves nothing). Every run is kept in `runs`.
 */
export async function runIngestBenchmark(
  databaseUrl: string,
  keysFile: string,
): Promise<{
  service: IngestFigures
  reference: IngestFigures
  ratio: number
  runs: Record<string, IngestFigures[]>
}> {
  const runs: Record<string, IngestFigures[]> = { service: [], reference: [] }
  for (let round = 1; round <= ROUNDS; round++) {
    log(`round ${round}/${ROUNDS}`)
    runs.service!.push(
      await measure(
        'service',
        ['bun', 'src/index.ts'],
        { DATABASE_URL: databaseUrl, REDIS_URL, DATABASE_POOL_SIZE: POOL_SIZE, LOG_LEVEL: 'info' },
        '/readyz',
        keysFile,
      ),
    )
    runs.reference!.push(
      await measure(
        'reference',
        ['bun', 'bench/reference-server.ts'],
        { DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE },
        '/',
        keysFile,
      ),
    )
  }
  const service = medianRun(runs.service!)
  const reference = medianRun(runs.reference!)
  return {
    service,
    reference,
    ratio: round(service.requestsPerSecond / reference.requestsPerSecond, 3),
    runs,
  }
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
    `${name.padEnd(13)} ${String(round(figures.requestsPerSecond, 0)).padStart(8)} req/s   p50 ${String(round(figures.p50Ms)).padStart(6)} ms   p99 ${String(round(figures.p99Ms)).padStart(6)} ms   peak RSS ${String(figures.peakRssMb).padStart(6)} MB   non-2xx ${figures.non2xx}`
  for (const [name, runs] of Object.entries(result.runs)) {
    for (const [index, figures] of runs.entries()) console.log(row(`${name} #${index + 1}`, figures))
  }
  console.log(row('service', result.service) + '   (median)')
  console.log(row('reference', result.reference) + '   (median)')
  console.log(`ratio (service / reference requests/s): ${result.ratio}`)
}

if (import.meta.main) {
  const { databaseUrl, keysFile } = await prepareBenchDatabase()
  const result = await runIngestBenchmark(databaseUrl, keysFile)
  printIngest(result)
  const file = join(ROOT, 'bench/results/ingest.json')
  writeFileSync(
    file,
    `${JSON.stringify({ date: new Date().toISOString(), sources: SOURCES, seconds: SECONDS, connections: CONNECTIONS, ...result }, null, 2)}\n`,
  )
  log(`written ${file}`)
}
