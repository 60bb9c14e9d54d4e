import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { provisionSources } from './provision'
import {
  checkoutBaseline,
  freshDatabase,
  log,
  medianBy,
  ROOT,
  round,
  runTag,
  runWrk,
  spawnService,
} from './support'

/**
 * `bun run bench:cpu -- --baseline <rev>`: CPU time of the service process per accepted lead, this
 * checkout against another commit's, in alternating paired runs (A B B A A B). Each service runs as
 * bench/support.ts starts it (PostgreSQL + Redis, the Dockerfile's JSC settings, access log on), on a
 * database of its own; wrk drives it at CONNECTIONS for SECONDS, and utime + stime of its process
 * are read from /proc/PID/stat around the run. CPU per request is what a shared machine distorts
 * least (throughput moves with the neighbours' load; the work done per request much less), so it is
 * the figure to compare when the machine is not quiet. Requests per second are printed too.
 */
const cli = parseArgs({
  options: { baseline: { type: 'string' }, pairs: { type: 'string' } },
  allowPositionals: true,
}).values
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100)
const PAIRS = Number(cli.pairs ?? 3)
const POOL_SIZE = String(process.env.BENCH_POOL_SIZE ?? 10)
const TICK_MS = 1000 / 100
/** Enough keys that no key nears its 60 a minute over the runs (about 5 requests per key per run). */
const SOURCES = Number(process.env.BENCH_SOURCES ?? 10_000)
const CHUNK = 500
/** Engineers sharing one PostgreSQL each bench on databases of their own. */
const DATABASE = process.env.BENCH_DATABASE ?? 'lead_capture_bench_cpu'

function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  // utime and stime, fields 14 and 15 of stat(5), in clock ticks (USER_HZ, 100 on Linux).
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS
}

interface Variant {
  name: string
  cwd?: string
  databaseUrl: string
  keysFile: string
}

async function measure(variant: Variant, run: number) {
  const server = await spawnService(
    { DATABASE_URL: variant.databaseUrl, DATABASE_POOL_SIZE: POOL_SIZE },
    {
      cwd: variant.cwd,
    },
  )
  try {
    const wrk = { url: server.url, keysFile: variant.keysFile, connections: CONNECTIONS, threads: 2 }
    await runWrk({ ...wrk, tag: runTag(`${variant.name}-warm`, String(run)), seconds: 3 })
    const before = processCpuMs(server.pid)
    const result = await runWrk({ ...wrk, tag: runTag(variant.name, String(run)), seconds: SECONDS })
    const cpuMs = processCpuMs(server.pid) - before
    const figures = {
      cpuUsPerRequest: round((cpuMs * 1000) / result.requests, 1),
      rps: Math.round(result.requestsPerSecond),
      requests: result.requests,
      non2xx: result.non2xx,
    }
    log(`run ${run} ${variant.name}: ${JSON.stringify(figures)}`)
    return figures
  } finally {
    await server.stop()
  }
}

/**
 * A database of its own with SOURCES sources, made by `cwd`'s CLI in runs of CHUNK: the CLI exits
 * before a long list of webhook URLs has left its stdout pipe (a run of 20,000 printed 8,000 to
 * 16,000 of them), and the baseline's CLI cannot be changed, so no run prints more than a pipe holds.
 */
async function benchDatabase(name: string, cwd?: string): Promise<{ databaseUrl: string; keysFile: string }> {
  const databaseUrl = await freshDatabase(name)
  log(`provisioning ${SOURCES} sources in ${name}${cwd ? ` with the CLI of ${cwd}` : ''}`)
  const keys: string[] = []
  while (keys.length < SOURCES) keys.push(...(await provisionSources(databaseUrl, CHUNK, cwd)))
  const keysFile = join(ROOT, `bench/results/keys-${name}.tmp`)
  writeFileSync(keysFile, `${keys.join('\n')}\n`)
  return { databaseUrl, keysFile }
}

if (!cli.baseline) throw new Error('usage: bun run bench/cpu-per-lead.ts --baseline <rev> [--pairs 3]')
const baseline = await checkoutBaseline(cli.baseline)
try {
  const here = await benchDatabase(`${DATABASE}_here`)
  const there = await benchDatabase(`${DATABASE}_${baseline.label}`, baseline.dir)
  const variants: Variant[] = [
    { name: 'this checkout', databaseUrl: here.databaseUrl, keysFile: here.keysFile },
    { name: `baseline ${baseline.label}`, cwd: baseline.dir, ...there },
  ]
  const results = new Map<string, Array<Awaited<ReturnType<typeof measure>>>>(
    variants.map((v) => [v.name, []]),
  )
  // A B B A A B ...: neither gains from running first or last while the neighbours' load drifts.
  let run = 0
  for (let pair = 0; pair < PAIRS; pair++) {
    const order = pair % 2 === 0 ? variants : [...variants].reverse()
    for (const variant of order) results.get(variant.name)!.push(await measure(variant, ++run))
  }
  for (const [name, runs] of results) {
    console.error(
      `${name}: CPU µs/request ${runs.map((r) => r.cpuUsPerRequest).join(', ')} (median ${medianBy(runs, (r) => r.cpuUsPerRequest).cpuUsPerRequest}); req/s ${runs.map((r) => r.rps).join(', ')}`,
    )
  }
} finally {
  await baseline.remove()
}
