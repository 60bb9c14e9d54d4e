import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { newId } from '../src/lib/ids'
import { SecretBox } from '../src/lib/secrets'
import { STALL_LOG_MS } from '../src/lib/stall-probe'
import { CollectorLogReader } from './collector-log'
import { newLeadPost, openLoop } from './open-loop'
import { provisionSources } from './provision'
import {
  ADMIN_DATABASE_URL,
  BENCH_SECRETS_KEY,
  BENCH_WEBHOOK_ENV,
  beganWithin,
  DISK_SLOW_MS,
  dockerfileJscEnv,
  forEachText,
  freePort,
  freshDatabase,
  LineSplitter,
  log,
  type MachineInterval,
  measuredSpan,
  PROBE_MS,
  percentile,
  REDIS_URL,
  ROOT,
  round,
  waitForReady,
} from './support'

/**
 * `bun run bench:stalls`: where the open-loop p99 comes from. One replica (the Dockerfile's JSC
 * settings, DIAGNOSE_STALLS on) takes RATE new leads a second; every request's latency is kept with
 * its due time, and the service logs each periodic job run (duration, event-loop blocking seen
 * meanwhile), each last-request flush, each event-loop stall (a 5 ms drift probe; `gc` when the
 * JS heap shrank in that interval) and each group of the group commit whose statement took 3 ms or
 * more (`group statement`, send to rows in hand) or whose oldest lead waited 3 ms or more before it
 * was sent (`group wait`). This process adds what the machine did meanwhile, sampled every 50 ms:
 * an interval whose disk writes or cache flushes took DISK_SLOW_MS or more on average (`disk writes
 * slow`: a commit's WAL flush waits behind them), and a sample that came 3 ms or more late (`client stall`:
 * the load generator itself sent late, and the open loop charges that to the service). The service
 * runs with JavaScriptCore's collector log (`BUN_JSC_logGC=1`, read by bench/collector-log.ts): every
 * eden and full collection is on the timeline with its pause, however short (the stall probe logs
 * only delays of 3 ms or more). Printed:
 * every 100 ms bucket whose p99 or max is slow, with the jobs and stalls that overlap it, and which
 * of them the slow requests overlapped.
 *
 *   --seconds 60       measured seconds (after --warm seconds of the same load)
 *   --warm 10          the service is ~3 s old when the warm-up starts: jobs due 5, 15, 20, 30, 45 s
 *                      after start and the roll-up at 65 s fall inside warm + 60 s
 *   --rate 1000
 *   --variants a=DIR,b=DIR   checkouts to compare (default: this one); a baseline is a worktree of
 *                      another commit (`git worktree add --detach /tmp/base main && bun install`)
 *   --order ABBAAB     run order of the variants (letters in the order of --variants)
 *   --watch-status     an endpoint takes source.status_changed, so that job checks every source
 *
 * Each run gets its own copy of its checkout's provisioned database (CREATE DATABASE ... TEMPLATE),
 * so a variant's runs start equal. A variant without DIAGNOSE_STALLS (an older commit) still gives
 * its latency timeline.
 */
const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    warm: { type: 'string', default: '10' },
    rate: { type: 'string', default: '1000' },
    variants: { type: 'string' },
    order: { type: 'string' },
    'watch-status': { type: 'boolean', default: false },
  },
})
const SECONDS = Number(args.seconds)
const WARM = Number(args.warm)
const RATE = Number(args.rate)
const SOURCES = Number(process.env.BENCH_SOURCES ?? 10_000)
const BUCKET_MS = 100
const SLOW_MS = 6
const MAX_BUCKETS = 40

const variants = (args.variants ?? `branch=${ROOT}`).split(',').map((entry) => {
  const [name, dir] = entry.split('=')
  return { name: name!, dir: dir ?? ROOT }
})
const order = (args.order ?? (variants.length > 1 ? 'ABBAAB' : 'A'))
  .split('')
  .map((letter) => variants[letter.charCodeAt(0) - 65]!)

interface ServerEvent {
  kind: 'stall' | 'job' | 'group' | 'disk' | 'client' | 'collection'
  name: string
  at: number
  durationMs: number
  fields: Record<string, unknown>
}

// Takes the status events' deliveries, so the worker's retries of a dead address add no noise.
const receiver = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: () => new Response(null, { status: 204 }),
})
/**
 * One template per checkout, migrated and provisioned by that checkout's own CLI. A commit whose
 * migrations differ must run on its own schema: on one template shared with a newer checkout, the old
 * commit's start-up put its SQL functions back over the newer schema (drizzle/functions are applied
 * by checksum), and on 2026-11-27 2ea864a's ingest_leads() then named a column drizzle/0021 had
 * dropped: every lead failed, and the run measured that (p50 14 s).
 */
const templates = new Map<string, { name: string; keys: string[] }>()
for (const dir of new Set(variants.map((variant) => variant.dir))) {
  const name = `lead_capture_stalls_template_${templates.size}`
  const templateUrl = await freshDatabase(name)
  log(`provisioning ${SOURCES} sources in ${name} with the CLI of ${dir}`)
  templates.set(dir, { name, keys: await provisionSources(templateUrl, SOURCES, dir) })
  if (args['watch-status']) await addStatusEndpoint(templateUrl, `http://127.0.0.1:${receiver.port}/status`)
}
const runs: Array<Awaited<ReturnType<typeof runOnce>>> = []
try {
  for (const [index, variant] of order.entries()) runs.push(await runOnce(variant, index))
} finally {
  receiver.stop(true)
}
if (runs.length > 1) {
  console.log('\nrun  variant  p50 ms  p99 ms  max ms  >6 ms')
  for (const [index, run] of runs.entries()) {
    console.log(
      `${String(index + 1).padEnd(4)} ${run.variant.padEnd(8)} ${String(run.p50Ms).padStart(6)} ${String(run.p99Ms).padStart(7)} ${String(run.maxMs).padStart(7)} ${String(run.slow).padStart(6)}`,
    )
  }
}
const file = join(ROOT, 'bench/results/stall-timeline.json')
writeFileSync(
  file,
  `${JSON.stringify({ date: new Date().toISOString(), rate: RATE, seconds: SECONDS, warm: WARM, runs }, null, 2)}\n`,
)
log(`written ${file}`)

async function runOnce(variant: { name: string; dir: string }, index: number) {
  const name = `lead_capture_stalls_${index}`
  const { name: template, keys } = templates.get(variant.dir)!
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.unsafe(`create database ${name} template ${template}`)
  } finally {
    await admin.end()
  }
  const url = new URL(ADMIN_DATABASE_URL)
  url.pathname = `/${name}`
  const port = await freePort()
  const events: ServerEvent[] = []
  const child = Bun.spawn(['bun', 'src/index.ts'], {
    cwd: variant.dir,
    env: {
      ...process.env,
      ...dockerfileJscEnv(variant.dir),
      DATABASE_URL: url.toString(),
      REDIS_URL,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DIAGNOSE_STALLS: 'true',
      ...BENCH_WEBHOOK_ENV,
      DATA_DIR: `/tmp/${name}-data`,
      BUN_JSC_logGC: '1',
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  void collectEvents(child.stdout, events)
  void collectCollections(child.stderr, events)
  const serviceStart = Date.now()
  const base = `http://127.0.0.1:${port}`
  try {
    await waitForReady(base, '/readyz')
    const request = (i: number, tag: string) =>
      newLeadPost(base, keys[i % keys.length]!, `${tag}-${index}-${i}@example.com`)
    log(`${variant.name} (run ${index + 1}): warm-up ${WARM} s, then ${SECONDS} s at ${RATE} req/s`)
    await openLoop({ rate: RATE, seconds: WARM, makeRequest: (i) => request(i, 'warm') })
    const samples: Array<{ due: number; latency: number }> = []
    const result = await openLoop({
      rate: RATE,
      seconds: SECONDS,
      makeRequest: (i) => request(i, 'run'),
      onLatency: (due, latency) => samples.push({ due: performance.timeOrigin + due, latency }),
      onMachineInterval: (interval) => events.push(...machineEvents(interval)),
    })
    await Bun.sleep(200)
    return report(variant.name, serviceStart, result, samples, events)
  } finally {
    child.kill('SIGTERM')
    await Promise.race([child.exited, Bun.sleep(15_000).then(() => child.kill('SIGKILL'))])
  }
}

/** A probe interval as the timeline's events: the disk slow in it, the load generator late. */
function machineEvents(interval: MachineInterval): ServerEvent[] {
  const events: ServerEvent[] = []
  if (interval.lateMs >= STALL_LOG_MS)
    events.push({
      kind: 'client',
      name: 'client stall',
      at: interval.at + PROBE_MS,
      durationMs: interval.lateMs,
      fields: {},
    })
  if (Math.max(interval.writeMs, interval.flushMs) >= DISK_SLOW_MS)
    events.push({
      kind: 'disk',
      name: 'disk writes slow',
      at: interval.at,
      durationMs: interval.durationMs,
      fields: { write_ms: interval.writeMs, flush_ms: interval.flushMs, mb_written: interval.mbWritten },
    })
  return events
}

async function collectEvents(stream: ReadableStream<Uint8Array>, events: ServerEvent[]) {
  const splitter = new LineSplitter()
  await forEachText(stream, (text) => {
    for (const line of splitter.push(text)) {
      // Cheap filter first: most lines are the access log.
      if (
        !line.includes('"msg":"event loop stalled"') &&
        !line.includes('"msg":"job run"') &&
        !line.includes('"msg":"group statement slow"')
      )
        continue
      const entry = JSON.parse(line) as Record<string, unknown>
      if (entry.msg === 'group statement slow') {
        // The group commit's slow groups (src/modules/inbound/group-commit.ts): the statement from
        // its send to its rows in hand, and the wait of the group's oldest lead before the send.
        const at = Number(entry.at)
        const statementMs = Number(entry.duration_ms)
        const waitMs = Number(entry.wait_ms)
        if (statementMs >= STALL_LOG_MS)
          events.push({ kind: 'group', name: 'group statement', at, durationMs: statementMs, fields: entry })
        if (waitMs >= STALL_LOG_MS)
          events.push({
            kind: 'group',
            name: 'group wait',
            at: at - waitMs,
            durationMs: waitMs,
            fields: entry,
          })
      } else if (entry.msg === 'job run') {
        events.push({
          kind: 'job',
          name: String(entry.job),
          at: Number(entry.at),
          durationMs: Number(entry.duration_ms),
          fields: entry,
        })
      } else {
        events.push({
          kind: 'stall',
          name: entry.gc ? 'stall (gc)' : 'stall',
          at: Number(entry.at),
          durationMs: Number(entry.delay_ms),
          fields: entry,
        })
      }
    }
  })
}

/**
 * The service's collections from its stderr, each placed just before the moment its last line
 * arrived (the log has no times; a collection in several increments spans more than its pauses).
 * Every other stderr line is passed on to this process's.
 */
async function collectCollections(stream: ReadableStream<Uint8Array>, events: ServerEvent[]) {
  const reader = new CollectorLogReader()
  await forEachText(stream, (text) => {
    const arrived = Date.now()
    const { collections, otherLines } = reader.push(text)
    for (const collection of collections) {
      events.push({
        kind: 'collection',
        name: `${collection.kind} collection`,
        at: arrived - collection.pauseMs,
        durationMs: collection.pauseMs,
        fields: { heap_kb: collection.heapKb, increments: collection.increments },
      })
    }
    if (otherLines.length > 0) process.stderr.write(`${otherLines.join('\n')}\n`)
  })
}

function report(
  variant: string,
  serviceStart: number,
  result: Awaited<ReturnType<typeof openLoop>>,
  samples: Array<{ due: number; latency: number }>,
  events: ServerEvent[],
) {
  const overlapping = (from: number, to: number) =>
    events.filter((event) => event.at <= to && event.at + event.durationMs >= from)
  // Grouped by name: "stall ×12 (longest 21.6 ms)", "last-request flush 176.6 ms (loop 12.1 ms)".
  const describe = (list: ServerEvent[]) => {
    const byName = new Map<string, ServerEvent[]>()
    for (const event of list) byName.set(event.name, [...(byName.get(event.name) ?? []), event])
    return [...byName].map(([name, group]) => {
      if (group[0]!.kind === 'disk') {
        // Every disk interval is one probe long: the slowest writes say more.
        const slowest = (event: ServerEvent) =>
          Math.max(Number(event.fields.write_ms), Number(event.fields.flush_ms))
        const worst = group.reduce((a, b) => (slowest(b) > slowest(a) ? b : a))
        return `${name} ×${group.length} (worst ${worst.fields.write_ms} ms a write, ${worst.fields.flush_ms} ms a flush, ${worst.fields.mb_written} MB in ${worst.durationMs} ms)`
      }
      const longest = group.reduce((a, b) => (b.durationMs > a.durationMs ? b : a))
      const loop = longest.kind === 'job' ? `, loop ${longest.fields.loop_blocked_ms} ms` : ''
      return `${name} ×${group.length} (longest ${longest.durationMs} ms${loop})`
    })
  }
  const buckets = new Map<number, number[]>()
  for (const sample of samples) {
    const bucket = Math.floor((sample.due - serviceStart) / BUCKET_MS)
    const list = buckets.get(bucket) ?? []
    buckets.set(bucket, list)
    list.push(sample.latency)
  }
  const slowBuckets: Array<{ t: number; n: number; p99: number; max: number; events: string[] }> = []
  for (const [bucket, latencies] of [...buckets].sort((a, b) => a[0] - b[0])) {
    latencies.sort((a, b) => a - b)
    const p99 = percentile(latencies, 0.99)
    const max = latencies[latencies.length - 1]!
    if (p99 <= SLOW_MS && max <= 2 * SLOW_MS) continue
    const from = serviceStart + bucket * BUCKET_MS
    slowBuckets.push({
      t: round((bucket * BUCKET_MS) / 1000, 1),
      n: latencies.length,
      p99: round(p99, 1),
      max: round(max, 1),
      events: describe(overlapping(from - 50, from + BUCKET_MS + max)),
    })
  }
  // Each slow request is charged to every job or stall that overlaps it (due → answered).
  const blame: Record<string, number> = {}
  let slow = 0
  for (const sample of samples) {
    if (sample.latency <= SLOW_MS) continue
    slow++
    const causes = new Set(overlapping(sample.due, sample.due + sample.latency).map((event) => event.name))
    if (causes.size === 0) causes.add('(none logged)')
    for (const cause of causes) blame[cause] = (blame[cause] ?? 0) + 1
  }
  const jobs: Record<string, { runs: number; maxDurationMs: number; maxLoopBlockedMs: number }> = {}
  for (const event of events) {
    if (event.kind !== 'job') continue
    const job = jobs[event.name] ?? { runs: 0, maxDurationMs: 0, maxLoopBlockedMs: 0 }
    jobs[event.name] = job
    job.runs++
    job.maxDurationMs = Math.max(job.maxDurationMs, event.durationMs)
    job.maxLoopBlockedMs = Math.max(job.maxLoopBlockedMs, Number(event.fields.loop_blocked_ms ?? 0))
  }
  // Counted over the measured seconds only, as the p99 is (the timeline above shows every event).
  const measuredEvents = beganWithin(events, measuredSpan(samples))
  const groups = (name: string) => measuredEvents.filter((event) => event.name === name)
  const longest = (list: ServerEvent[]) => round(Math.max(0, ...list.map((event) => event.durationMs)), 1)
  const stalls = measuredEvents.filter((event) => event.kind === 'stall')
  const gcStalls = stalls.filter((event) => event.fields.gc)
  console.log(
    `\n== ${variant}: p50 ${round(result.p50Ms)} ms, p99 ${round(result.p99Ms)} ms, max ${round(result.maxMs)} ms, ${slow} of ${samples.length} over ${SLOW_MS} ms, client ${result.clientCores} cores, idle ${result.idlePct}%, steal ${result.stealPct}%`,
  )
  console.log(
    `event-loop stalls >= 3 ms in the measured seconds: ${stalls.length} (${gcStalls.length} with a GC), longest ${longest(stalls)} ms`,
  )
  const diskSlow = measuredEvents.filter((event) => event.kind === 'disk')
  const clientStalls = measuredEvents.filter((event) => event.kind === 'client')
  const worstMs = (field: string) =>
    round(Math.max(0, ...diskSlow.map((event) => Number(event.fields[field]))), 2)
  console.log(
    `disk in the measured seconds: ${diskSlow.length} intervals of ${PROBE_MS} ms whose writes or flushes took >= ${DISK_SLOW_MS} ms on average (worst write ${worstMs('write_ms')} ms, flush ${worstMs('flush_ms')} ms); client stalls >= ${STALL_LOG_MS} ms: ${clientStalls.length}, longest ${longest(clientStalls)} ms`,
  )
  console.log(
    `group commit in the measured seconds: ${groups('group statement').length} statements >= ${STALL_LOG_MS} ms (longest ${longest(groups('group statement'))} ms), ${groups('group wait').length} groups whose oldest lead waited >= ${STALL_LOG_MS} ms (longest ${longest(groups('group wait'))} ms)`,
  )
  const eden = groups('eden collection')
  const full = groups('full collection')
  const edenPauses = eden.map((event) => event.durationMs).sort((a, b) => a - b)
  const collections = {
    eden: eden.length,
    edenMedianMs: round(edenPauses.length > 0 ? percentile(edenPauses, 0.5) : 0, 2),
    edenLongestMs: longest(eden),
    full: full.length,
    fullLongestMs: longest(full),
    pausedMs: round(
      [...eden, ...full].reduce((sum, event) => sum + event.durationMs, 0),
      1,
    ),
  }
  console.log(
    `collections in the measured seconds: ${collections.eden} eden (median ${collections.edenMedianMs} ms, longest ${collections.edenLongestMs} ms), ${collections.full} full (longest ${collections.fullLongestMs} ms), ${collections.pausedMs} ms paused in all`,
  )
  // The worst MAX_BUCKETS by max latency, in time order: an overloaded run would list every bucket.
  const worst = [...slowBuckets]
    .sort((a, b) => b.max - a.max)
    .slice(0, MAX_BUCKETS)
    .sort((a, b) => a.t - b.t)
  console.log(
    `slow buckets: ${slowBuckets.length} of ${buckets.size}; the worst ${worst.length} (t = seconds since the service was spawned):`,
  )
  for (const bucket of worst) {
    console.log(
      `  t=${String(bucket.t).padStart(5)} n=${bucket.n} p99 ${bucket.p99} max ${bucket.max}  ${bucket.events.join('; ')}`,
    )
  }
  console.log(`slow requests overlapping: ${JSON.stringify(blame)}`)
  console.log(`job runs (whole life of the service): ${JSON.stringify(jobs)}`)
  return {
    variant,
    p50Ms: round(result.p50Ms),
    p99Ms: round(result.p99Ms),
    maxMs: round(result.maxMs),
    slow,
    groupStatements: groups('group statement').length,
    groupWaits: groups('group wait').length,
    requests: samples.length,
    stalls: stalls.length,
    gcStalls: gcStalls.length,
    diskSlowIntervals: diskSlow.length,
    clientStalls: clientStalls.length,
    collections,
    blame,
    jobs,
    slowBuckets: worst,
  }
}

/** An enabled endpoint of the benchmark's organization that takes source.status_changed. */
async function addStatusEndpoint(databaseUrl: string, receiverUrl: string) {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const [row] = await sql`select organization_id from webhook_sources limit 1`
    const now = new Date()
    await sql`insert into webhook_endpoints (id, organization_id, url, event_types, secret_ciphertext, created_at, updated_at)
      values (${newId()}, ${row!.organization_id as string}, ${receiverUrl}, '["source.status_changed"]'::jsonb,
        ${new SecretBox(BENCH_SECRETS_KEY).seal(`whsec_${Buffer.alloc(24, 1).toString('base64')}`)}, ${now}, ${now})`
  } finally {
    await sql.end()
  }
}
