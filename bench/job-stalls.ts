import { join } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { createLogger } from '../src/lib/logger'
import { EventLoopProbe } from '../src/lib/stall-probe'
import { provisionSources } from './provision'
import { BENCH_SECRETS_KEY, freshDatabase, log, REDIS_URL, ROOT, round } from './support'

/**
 * `bun run bench:jobs`: what each periodic job and write-behind flush costs the event loop, measured
 * in a way the machine's other load distorts little. Each job runs alone in this process against a
 * database of 10,000 sources (one endpoint of their organization takes source.status_changed; every
 * source has recent delivery logs to roll up and to judge health by; 20,000 logs are past retention).
 * Per run: wall time; this process's CPU time (main-thread work: all of it blocks the event loop
 * of a replica); the sum and the longest of the event loop's delays (5 ms drift probe); and the
 * database's transactions (pg_stat_database.xact_commit, one per autocommit statement).
 *
 *   --cwd DIR   the checkout whose job code runs (default: this one), e.g. a worktree of main
 *   --runs 3
 *   --only TEXT  the jobs whose name contains TEXT
 */
const { values: args } = parseArgs({
  options: {
    cwd: { type: 'string', default: ROOT },
    runs: { type: 'string', default: '3' },
    only: { type: 'string' },
  },
})
const DIR = args.cwd!
const RUNS = Number(args.runs)
const SOURCES = Number(process.env.BENCH_SOURCES ?? 10_000)

const databaseUrl = await freshDatabase('lead_capture_jobs')
log(`provisioning ${SOURCES} sources with the CLI of ${DIR}`)
await provisionSources(databaseUrl, SOURCES, DIR)

// Imported after provisioning: while this process was busy loading them, the CLI's output arrived
// cut short (its stdout is not drained before it exits; seen twice under load).
const load = (path: string) => import(join(DIR, path))
const { loadConfig } = await load('src/config.ts')
const { createContext } = await load('src/context.ts')
const { buildServices } = await load('src/services.ts')
const { rollupDeliveryLogs } = await load('src/modules/delivery-logs/rollup.ts')
const { purgeExpiredLogs } = await load('src/modules/delivery-logs/retention.ts')
const { announceSourceStatusChanges } = await load('src/modules/webhook-endpoints/events.ts')
const { LastRequestRecorder } = await load('src/modules/inbound/last-request.ts')
const { newId } = await load('src/lib/ids.ts')
const { SecretBox } = await load('src/lib/secrets.ts')

const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
await seed(sql)

const ctx = await createContext(
  loadConfig({
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    LOG_LEVEL: 'warn',
    WEBHOOK_SECRETS_KEY: BENCH_SECRETS_KEY,
    DATA_DIR: '/tmp/lead-capture-jobs-data',
  }),
)
const services = buildServices(ctx)
const probe = new EventLoopProbe(createLogger('silent', () => {})).start()
const sourceIds = (await sql`select id from webhook_sources`).map((row) => row.id as string)

const jobs: Array<{ name: string; run: () => Promise<unknown> }> = [
  { name: 'delivery-log roll-up', run: () => rollupDeliveryLogs(ctx) },
  {
    name: 'source.status_changed',
    run: () =>
      announceSourceStatusChanges(ctx, { health: services.deliveryLogs, service: services.webhookEndpoints }),
  },
  {
    // The first run deletes the 20,000 expired logs; the next ones find none.
    name: 'log retention',
    run: () => purgeExpiredLogs(ctx, ctx.clock.now()),
  },
  {
    // What 5 s of 1,000 requests/s round-robin over 10,000 sources leave: 5,000 sources.
    name: 'last-request flush (5,000 sources)',
    run: async () => {
      const recorder = new LastRequestRecorder(ctx)
      const now = Date.now()
      for (const id of sourceIds.slice(0, 5000)) recorder.note(id, now)
      await recorder.stop()
    },
  },
]

console.log(
  'job                                 run  wall ms  cpu ms  loop blocked ms  longest delay ms  xacts  result',
)
for (const job of jobs.filter((each) => !args.only || each.name.includes(args.only))) {
  for (let run = 1; run <= RUNS; run++) {
    // Backends publish their counters at most once a second: settle before each reading.
    await Bun.sleep(1100)
    const xactsBefore = await xacts()
    const before = probe.mark()
    probe.takeMaxDelayMs()
    const cpu = process.cpuUsage()
    const started = performance.now()
    const result = await job.run()
    const wall = performance.now() - started
    const used = process.cpuUsage(cpu)
    await Bun.sleep(20) // the probe's next tick, to see a delay that ended the run
    const blocked = probe.mark().blockedMs - before.blockedMs
    const longest = probe.takeMaxDelayMs()
    await Bun.sleep(1100)
    // The xact_commit counter is published by each backend at its transaction's end; the query
    // itself and the statistics' lag make this approximate (±1 or 2), not exact.
    const xactCount = (await xacts()) - xactsBefore - 1
    console.log(
      `${job.name.padEnd(36)} ${String(run).padStart(3)} ${String(round(wall, 1)).padStart(8)} ${String(round((used.user + used.system) / 1000, 1)).padStart(7)} ${String(round(blocked, 1)).padStart(16)} ${String(round(longest, 1)).padStart(17)} ${String(xactCount).padStart(6)}  ${JSON.stringify(result ?? null).slice(0, 60)}`,
    )
  }
}
probe.stop()
await ctx.close()
await sql.end()

async function xacts(): Promise<number> {
  // Fresh numbers: the statistics snapshot of this session would otherwise be cached.
  const [row] = await sql`select pg_stat_clear_snapshot(), xact_commit::int8 as n
    from pg_stat_database where datname = current_database()`
  return Number(row!.n)
}

async function seed(db: postgres.Sql) {
  const [org] = await db`select organization_id from webhook_sources limit 1`
  const organizationId = org!.organization_id as string
  const now = new Date()
  await db`insert into webhook_endpoints (id, organization_id, url, event_types, secret_ciphertext, created_at, updated_at)
    values (${newId()}, ${organizationId}, 'http://127.0.0.1:9/status', '["source.status_changed"]'::jsonb,
      ${new SecretBox(BENCH_SECRETS_KEY).seal(`whsec_${Buffer.alloc(24, 1).toString('base64')}`)}, ${now}, ${now})`
  // Three recent logs per source (older than the roll-up's 2-minute delay), one a failure.
  await db`insert into delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason, duration_ms)
    select gen_random_uuid(), s.id, s.organization_id, now() - make_interval(mins => 5 + n * 7), 'POST',
      case when n = 2 then 400 else 200 end, case when n = 2 then 'rejected' else 'created' end,
      case when n = 2 then 'invalid body' end, 2.5
    from webhook_sources s cross join generate_series(0, 2) n`
  // Past retention (30 days): 20,000 logs.
  await db`insert into delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, duration_ms)
    select gen_random_uuid(), s.id, s.organization_id, now() - make_interval(days => 31 + n), 'POST', 200, 'created', 2
    from webhook_sources s cross join generate_series(0, 1) n`
  await db`analyze`
}
