import { readdirSync, readFileSync } from 'node:fs'
import postgres from 'postgres'
import { handlerContender, prepareBenchDatabase } from './ingest'
import { newLeadPost, openLoop } from './open-loop'
import { checkoutBaseline, log, parseEnvAssignments, runTag, spawnService } from './support'

/**
 * `bun run bench:rate-split`: where the CPU goes at issue [7]'s fixed rate (1,000 new leads a second,
 * open loop), per thread of the server and per PostgreSQL backend, for the service and the least-work
 * `Bun.sql` handler (bench/reference-server.ts) on one bench database, alternating (A B, B A, …).
 * Each contender is warmed 15 s at the rate, then measured for BENCH_RATE_SECONDS (default 20); over
 * the measured seconds it reads `/proc/<tid>/schedstat` of every thread of the server process and of
 * every backend connected to the database: CPU time, time spent runnable but waiting for a core
 * (the run queue) and timeslices, each per second of wall time. `bench:cpu-split` does the same at
 * saturation; at this rate the groups of the group commit are ~1 lead, so a call's fixed costs are
 * paid per lead, and the open loop's p99 is set by how busy the group commit's connection is and
 * how long each process waits for a core.
 *
 * Environment: BENCH_ROUNDS (default 2), BENCH_RATE (1000), BENCH_RATE_SECONDS (20), BENCH_SOURCES
 * (10,000), BENCH_RATE_SPLIT_ENV=NAME=value+NAME=value (adds the service with that environment as a
 * third contender, e.g. INGEST_GROUPS_IN_FLIGHT=2), BENCH_RATE_SPLIT_BASELINE=<rev> (adds that
 * commit's service, from a temporary worktree, on a database of its own that its own CLI provisions:
 * a change to the code against the code before it, in the same run).
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)
const RATE = Number(process.env.BENCH_RATE ?? 1000)
const SECONDS = Number(process.env.BENCH_RATE_SECONDS ?? 20)
const WARM_SECONDS = 15
/** Threads and backends below this many ms of CPU a second are left out of the lines. */
const SHOWN_FROM_MS = 2
const variantEnv = process.env.BENCH_RATE_SPLIT_ENV
  ? parseEnvAssignments(process.env.BENCH_RATE_SPLIT_ENV)
  : null

const main = await prepareBenchDatabase('rate_split')
const baseline = process.env.BENCH_RATE_SPLIT_BASELINE
  ? await checkoutBaseline(process.env.BENCH_RATE_SPLIT_BASELINE)
  : null
const baselineDatabase = baseline ? await prepareBenchDatabase('rate_split_baseline', baseline.dir) : null

/**
 * A database of the run: its URL, its source keys, and this bench's own connection to it (its
 * backends list and its lead counts).
 */
interface RunDatabase {
  databaseUrl: string
  keys: string[]
  bench: postgres.Sql
}
const connect = ({ databaseUrl, keys }: { databaseUrl: string; keys: string[] }): RunDatabase => ({
  databaseUrl,
  keys,
  bench: postgres(databaseUrl, { max: 1, onnotice: () => {} }),
})
const mainDatabase = connect(main)
const ownDatabase = baselineDatabase ? connect(baselineDatabase) : null

interface Schedstat {
  cpuNs: number
  waitNs: number
  slices: number
}

function schedstat(path: string): Schedstat | null {
  try {
    const [cpu, wait, slices] = readFileSync(path, 'utf8').trim().split(' ').map(Number)
    return { cpuNs: cpu!, waitNs: wait!, slices: slices! }
  } catch {
    return null // the thread or backend ended meanwhile
  }
}

/** Every thread of the server (`name:tid`) and every backend of the bench database (`backend:pid`). */
async function sample(serverPid: number, { bench }: RunDatabase): Promise<Map<string, Schedstat>> {
  const out = new Map<string, Schedstat>()
  for (const tid of readdirSync(`/proc/${serverPid}/task`)) {
    const name = readFileSync(`/proc/${serverPid}/task/${tid}/comm`, 'utf8').trim()
    const stat = schedstat(`/proc/${serverPid}/task/${tid}/schedstat`)
    if (stat) out.set(`${name}:${tid}`, stat)
  }
  const backends = await bench<{ pid: number }[]>`
    select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
  for (const { pid } of backends) {
    const stat = schedstat(`/proc/${pid}/schedstat`)
    if (stat) out.set(`backend:${pid}`, stat)
  }
  return out
}

/** Request `index` of a run whose e-mails start with `prefix` (letters, digits and `-` only). */
function leadRequest(
  url: string,
  { keys }: RunDatabase,
  index: number,
  prefix: string,
): { url: string; init: RequestInit } {
  return newLeadPost(url, keys[index % keys.length]!, `${prefix}-${index}@example.com`)
}

/**
 * `slug` goes into the run's e-mails, so it stays a valid local part: a contender's name with
 * brackets, spaces or `=` in its e-mails made every lead `missing_contact` (no lead stored, a
 * different statement), which a first version of this bench measured without noticing.
 */
const contenders = [
  {
    name: 'service',
    slug: 'service',
    stores: true,
    database: mainDatabase,
    start: () => spawnService({ DATABASE_URL: mainDatabase.databaseUrl }),
  },
  {
    name: 'Bun.sql handler',
    slug: 'handler',
    stores: false,
    database: mainDatabase,
    start: () => handlerContender('Bun.sql handler').start(mainDatabase.databaseUrl),
  },
  ...(variantEnv
    ? [
        {
          name: `service [${process.env.BENCH_RATE_SPLIT_ENV}]`,
          slug: 'variant',
          stores: true,
          database: mainDatabase,
          start: () => spawnService({ DATABASE_URL: mainDatabase.databaseUrl, ...variantEnv }),
        },
      ]
    : []),
  ...(baseline && ownDatabase
    ? [
        {
          name: `service (${baseline.label})`,
          slug: 'baseline',
          stores: true,
          database: ownDatabase,
          start: () => spawnService({ DATABASE_URL: ownDatabase.databaseUrl }, { cwd: baseline.dir }),
        },
      ]
    : []),
]

const summary: string[] = []
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const contender of round % 2 === 1 ? contenders : [...contenders].reverse()) {
      const server = await contender.start()
      try {
        log(
          `${contender.name}, round ${round}: warm-up ${WARM_SECONDS} s, then ${SECONDS} s at ${RATE} requests/s`,
        )
        await openLoop({
          rate: RATE,
          seconds: WARM_SECONDS,
          makeRequest: (index) =>
            leadRequest(
              server.url,
              contender.database,
              index,
              runTag(`${contender.slug}-warm-${round}`, 'rate-split'),
            ),
        })
        const prefix = runTag(`${contender.slug}-${round}`, 'rate-split')
        const before = await sample(server.pid, contender.database)
        const started = performance.now()
        const result = await openLoop({
          rate: RATE,
          seconds: SECONDS,
          makeRequest: (index) => leadRequest(server.url, contender.database, index, prefix),
        })
        const after = await sample(server.pid, contender.database)
        const seconds = (performance.now() - started) / 1000
        // Every answered request of a service run must have stored its lead: anything else (a
        // refusal answered 200, such as missing_contact) would be a different path's figures.
        if (contender.stores) {
          const [row] = await contender.database.bench<{ stored: number }[]>`
            select count(*)::int as stored from leads where email like ${`${prefix}-%`}`
          const stored = row?.stored ?? 0
          if (stored < result.ok)
            throw new Error(
              `${contender.name}: ${stored} leads stored for ${result.ok} answers: not the lead path`,
            )
        }
        const lines = [...after]
          .filter(([key]) => before.has(key))
          .map(([key, end]) => {
            const start = before.get(key)!
            return {
              key,
              cpu: (end.cpuNs - start.cpuNs) / 1e6 / seconds,
              wait: (end.waitNs - start.waitNs) / 1e6 / seconds,
              slices: (end.slices - start.slices) / seconds,
            }
          })
          .sort((a, b) => b.cpu - a.cpu)
        const backends = lines.filter((line) => line.key.startsWith('backend:'))
        const sum = (values: number[]) => values.reduce((total, value) => total + value, 0)
        const main = lines.find((line) => line.key.endsWith(`:${server.pid}`))
        const line = `${contender.name}, round ${round}: p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ok ${result.ok}/${result.sent}, machine idle ${result.idlePct}%; main thread ${main?.cpu.toFixed(1)} ms/s of CPU, ${main?.wait.toFixed(1)} ms/s in the run queue; backends ${sum(backends.map((b) => b.cpu)).toFixed(1)} ms/s of CPU, ${sum(backends.map((b) => b.wait)).toFixed(1)} ms/s in the run queue`
        console.log(line)
        summary.push(line)
        for (const entry of lines.filter((entry) => entry.cpu >= SHOWN_FROM_MS)) {
          console.log(
            `   ${entry.key.padEnd(28)} CPU ${entry.cpu.toFixed(1).padStart(6)} ms/s   run queue ${entry.wait.toFixed(1).padStart(5)} ms/s   ${entry.slices.toFixed(0)} timeslices/s`,
          )
        }
      } finally {
        await server.stop()
      }
    }
  }
} finally {
  await mainDatabase.bench.end()
  await ownDatabase?.bench.end()
  await baseline?.remove()
}
console.log(`\n${summary.join('\n')}`)
console.log(
  `(${RATE} requests/s, open loop, ${SECONDS} s measured after ${WARM_SECONDS} s of warm-up; CPU and run-queue time per second of wall time, /proc/<tid>/schedstat)`,
)
