import { accessSync, constants, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { loadConfig } from '../src/config'
import { openDatabase } from '../src/db/client'
import { runMigrations } from '../src/db/migrate'
import { newId } from '../src/lib/ids'
import { createMemoryLogger } from '../src/lib/logger'
import { freshDatabase, log, medianBy, ROOT, round } from './support'

/**
 * `bun run bench:outbox`: what writing the webhook outbox inside ingest_leads() costs PostgreSQL,
 * old function against new in the same run and the same database. The function of drizzle/0009
 * (before the outbox) is created beside the current one as `ingest_leads_before`, read from its
 * migration file. Three variants, each driven the same way (CLIENTS connections, each calling the
 * function in a loop with groups of GROUP leads with distinct e-mails, for SECONDS):
 *
 *   before          0009's function, organization without endpoints
 *   no endpoint     current function, organization without endpoints
 *   one endpoint    current function, organization with one endpoint subscribed to lead.created
 *                   (every lead also writes a message; its delivery is the worker's, drizzle/0019)
 *   <name>, one endpoint   with BENCH_CANDIDATES only, see CANDIDATES below
 *
 * Besides leads/s (noisy on a shared machine), each run records the CPU time the database's
 * backends spent per lead (/proc/<pid>/stat), the WAL the server wrote per lead (pg_stat_wal and
 * the WAL position: the whole server's, so nothing else should run; with pg_waldump at hand also
 * the records' bytes without full-page images, which do not depend on when the last checkpoint
 * was), and the load average at its start and end.
 *
 * Rounds rotate the order of the variants (so none always runs on a warmer or more bloated table);
 * every round is kept, the figure is the median round's leads/s per variant.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8)
const GROUP = Number(process.env.BENCH_GROUP ?? 16)
// Since drizzle/0013 the current function holds each source's limit of 60 leads a minute: with
// items spread over this many sources no source reaches it (~20,000 leads/s over 40,000 sources is
// 30 a minute each), so every variant writes every lead.
const SOURCES = 40_000

// BENCH_CANDIDATES=name=path[,name=path…]: a variant per file, each a definition of
// `ingest_leads(` (as drizzle/functions/ingest_leads.sql spells it) created beside the current one as
// `ingest_leads_<name>` and driven with the organization that has the endpoint: a change to the
// function's outbox measured against the current one in the same rounds and database.
const CANDIDATES = (process.env.BENCH_CANDIDATES ?? '')
  .split(',')
  .filter(Boolean)
  .map((pair) => {
    const [name, path] = pair.split('=')
    if (!name || !path || !/^[a-z0-9_]+$/.test(name))
      throw new Error(`BENCH_CANDIDATES: name=path, got ${pair}`)
    return { name, path }
  })
type Variant = string
const VARIANTS: Variant[] = [
  'before',
  'no endpoint',
  'one endpoint',
  ...CANDIDATES.map((candidate) => `${candidate.name}, one endpoint`),
]

const url = await freshDatabase(process.env.BENCH_DATABASE ?? 'lead_capture_bench_outbox')
const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent' })
const handle = await openDatabase(config)
await runMigrations(config, handle, createMemoryLogger('silent'))
await handle.close()

const sql = postgres(url, { max: CLIENTS, onnotice: () => {}, prepare: true })
const migration = readFileSync(join(ROOT, 'drizzle/0009_hot_tables_without_foreign_keys.sql'), 'utf8')
const before = migration.slice(migration.indexOf('CREATE OR REPLACE FUNCTION ingest_leads'))
await sql.unsafe(before.replace('FUNCTION ingest_leads(', 'FUNCTION ingest_leads_before('))
// BENCH_CANDIDATE_SETUP=path: SQL run once before the candidates are created (a column or table a
// candidate writes that the migrations do not make), so a change of schema can be measured too.
if (process.env.BENCH_CANDIDATE_SETUP)
  await sql.unsafe(readFileSync(process.env.BENCH_CANDIDATE_SETUP, 'utf8'))
for (const candidate of CANDIDATES) {
  const text = readFileSync(candidate.path, 'utf8')
  const definition = text.slice(text.indexOf('CREATE FUNCTION ingest_leads('))
  if (!definition) throw new Error(`${candidate.path}: no CREATE FUNCTION ingest_leads(`)
  await sql.unsafe(definition.replace('FUNCTION ingest_leads(', `FUNCTION ingest_leads_${candidate.name}(`))
}

/**
 * CPU time (user + system, in clock ticks) of this database's backends, from /proc: PostgreSQL's
 * work per lead, which the shared machine's other load changes far less than it changes leads/s.
 * The bench runs on the database server's host (loopback), so the backends' /proc entries are ours
 * to read.
 */
const CLOCK_TICKS_PER_SECOND = 100
const probe = postgres(url, { max: 1, onnotice: () => {} })
async function backendTicks(): Promise<number> {
  const rows = await probe<{ pid: number }[]>`
    select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
  let ticks = 0
  for (const { pid } of rows) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // a backend that ended meanwhile: its time is lost to both sides of the difference
    }
  }
  return ticks
}

async function organizationWithSources(withEndpoint: boolean): Promise<{ id: string; sources: string[] }> {
  const id = newId()
  await sql`insert into organizations (id, name, plan) values (${id}, 'bench', 'pro')`
  const sources = Array.from({ length: SOURCES }, () => newId())
  await sql`insert into webhook_sources (id, organization_id, name, key_digest, key_hint)
    select s, ${id}, 'bench', gen_random_uuid()::text, 'xxxx' from unnest(${sources}::uuid[]) s`
  if (withEndpoint) {
    const now = new Date()
    await sql`insert into webhook_endpoints (id, organization_id, url, event_types, secret_ciphertext, created_at, updated_at)
      values (${newId()}, ${id}, 'http://127.0.0.1:9/', '["lead.created"]'::jsonb, 'v1.x.x.x', ${now}, ${now})`
  }
  return { id, sources }
}

const plain = await organizationWithSources(false)
const subscribed = await organizationWithSources(true)
await sql`analyze`

function group(organization: { id: string; sources: string[] }) {
  const receivedAt = new Date().toISOString()
  return Array.from({ length: GROUP }, (_, idx) => {
    const address = `bench-${crypto.randomUUID()}@example.com`
    const id = newId()
    return {
      idx,
      organization_id: organization.id,
      source_id: organization.sources[Math.floor(Math.random() * SOURCES)],
      // one id: the current function gives a created lead its log id; older ones read new_lead_id
      new_lead_id: id,
      log_id: id,
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: address,
      email_normalized: address,
      phone_raw: null,
      phone_e164: null,
      status: 'new',
      custom_fields: { company: 'Engines' },
      attribution: {},
      received_at: receivedAt,
      client_ip: '127.0.0.1',
      origin: null,
      user_agent: 'bench',
      body_bytes: 120,
      body: '{"email":"…"}',
      body_truncated: false,
      duration_ms: 1,
    }
  })
}

const FUNCTION_OF: Record<Variant, string> = {
  before: 'ingest_leads_before',
  'no endpoint': 'ingest_leads',
  'one endpoint': 'ingest_leads',
  ...Object.fromEntries(
    CANDIDATES.map((candidate) => [`${candidate.name}, one endpoint`, `ingest_leads_${candidate.name}`]),
  ),
}

/**
 * The server's WAL position and full-page images so far (pg_stat_wal, PostgreSQL 14+): what a
 * variant makes each lead write, which unlike its CPU does not move with the machine's load. Both
 * count the whole server: nothing else should write meanwhile.
 */
async function walSoFar(): Promise<{ lsn: string; fpi: number }> {
  const [row] = await probe<{ lsn: string; fpi: string }[]>`
    select pg_current_wal_lsn()::text as lsn, (select wal_fpi from pg_stat_wal)::text as fpi`
  return { lsn: row!.lsn, fpi: Number(row!.fpi) }
}

/**
 * The WAL records' own bytes between two positions, without the full-page images (which depend on
 * when the last checkpoint was, not on the variant): `pg_waldump --stats` over the server's pg_wal,
 * when PostgreSQL runs on this host and its files are readable (as root on the bench machine);
 * null otherwise, and then only the totals above are reported.
 */
const [server] = await probe<{ dir: string; version: string }[]>`
  select current_setting('data_directory') as dir, current_setting('server_version_num') as version`
const WAL_DIR = join(server!.dir, 'pg_wal')
const WALDUMP = `/usr/lib/postgresql/${Math.floor(Number(server!.version) / 10000)}/bin/pg_waldump`
const canDumpWal = (() => {
  try {
    accessSync(WALDUMP, constants.X_OK)
    accessSync(WAL_DIR, constants.R_OK)
    return true
  } catch {
    return false
  }
})()
log(canDumpWal ? `WAL records measured with ${WALDUMP}` : 'pg_waldump or pg_wal not at hand: WAL totals only')
function walRecordBytes(start: string, end: string): number | null {
  if (!canDumpWal) return null
  const dump = Bun.spawnSync([WALDUMP, '--stats=rmgr', '-p', WAL_DIR, '-s', start, '-e', end])
  const total = dump.stdout
    .toString()
    .split('\n')
    .find((line) => line.startsWith('Total'))
  if (dump.exitCode !== 0 || !total) return null
  // "Total  N  record-bytes [pct]  fpi-bytes [pct]  combined [pct]"
  const numbers = total
    .replace(/\(.*?\)|\[.*?\]/g, '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number)
  return numbers[1] ?? null
}

interface Driven {
  leadsPerSecond: number
  cpuUsPerLead: number
  walBytesPerLead: number
  /** Without full-page images (null without pg_waldump). */
  walRecordBytesPerLead: number | null
  fullPagesPer1000Leads: number
}

/** Leads/s, PostgreSQL CPU µs per lead (this database's backends), WAL written per lead. */
async function drive(variant: Variant): Promise<Driven> {
  const statement = `select * from ${FUNCTION_OF[variant]}($1::jsonb)`
  const organization = variant === 'before' || variant === 'no endpoint' ? plain : subscribed
  const walBefore = await walSoFar()
  const ticksBefore = await backendTicks()
  const deadline = performance.now() + SECONDS * 1000
  let leads = 0
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < deadline) {
        await sql.unsafe(statement, [group(organization) as never])
        leads += GROUP
      }
    }),
  )
  const ticks = (await backendTicks()) - ticksBefore
  const walAfter = await walSoFar()
  const [wal] = await probe<{ bytes: string }[]>`
    select pg_wal_lsn_diff(${walAfter.lsn}::pg_lsn, ${walBefore.lsn}::pg_lsn)::text as bytes`
  const recordBytes = walRecordBytes(walBefore.lsn, walAfter.lsn)
  return {
    leadsPerSecond: leads / SECONDS,
    cpuUsPerLead: (ticks / CLOCK_TICKS_PER_SECOND / leads) * 1e6,
    walBytesPerLead: Number(wal!.bytes) / leads,
    walRecordBytesPerLead: recordBytes === null ? null : recordBytes / leads,
    fullPagesPer1000Leads: ((walAfter.fpi - walBefore.fpi) / leads) * 1000,
  }
}

const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
const loadAtStart = loadAverage()
// Warm every variant once (plans, caches), not counted.
for (const variant of VARIANTS) await drive(variant)
// Statistics of tables that hold rows, as the service's planner-statistics job (or autovacuum)
// leaves them: ingest_leads() runs on generic plans, and the ones made from the statistics of the
// empty tables above looked leads up by scanning them (~2 ms of PostgreSQL CPU per lead by the
// end of a run). ANALYZE invalidates the plans cached so far.
await sql`analyze`
const rounds: Array<Record<Variant, number>> = []
const cpuRounds: Array<Record<Variant, number>> = []
const walRounds: Array<Record<Variant, number>> = []
const walRecordRounds: Array<Record<Variant, number | null>> = []
for (let round_ = 0; round_ < ROUNDS; round_++) {
  const figures = {} as Record<Variant, number>
  const cpu = {} as Record<Variant, number>
  const wal = {} as Record<Variant, number>
  const walRecords = {} as Record<Variant, number | null>
  const order = VARIANTS.map((_, index) => VARIANTS[(index + round_) % VARIANTS.length]!)
  for (const variant of order) {
    const measured = await drive(variant)
    figures[variant] = round(measured.leadsPerSecond, 0)
    cpu[variant] = round(measured.cpuUsPerLead, 1)
    wal[variant] = round(measured.walBytesPerLead, 0)
    walRecords[variant] =
      measured.walRecordBytesPerLead === null ? null : round(measured.walRecordBytesPerLead, 0)
    log(
      `round ${round_ + 1}: ${variant}: ${figures[variant]} leads/s, ${cpu[variant]} µs PostgreSQL CPU per lead, ` +
        `${wal[variant]} WAL bytes per lead (${walRecords[variant] ?? '?'} without full pages; ` +
        `${round(measured.fullPagesPer1000Leads, 1)} full pages per 1,000)`,
    )
  }
  rounds.push(figures)
  cpuRounds.push(cpu)
  walRounds.push(wal)
  walRecordRounds.push(walRecords)
}
await sql.end()
await probe.end()

const median = (variant: Variant) => medianBy(rounds, (figures) => figures[variant]!)[variant]!
const medianCpu = (variant: Variant) => medianBy(cpuRounds, (figures) => figures[variant]!)[variant]!
const medianWal = (variant: Variant) => medianBy(walRounds, (figures) => figures[variant]!)[variant]!
const result = {
  method: { seconds: SECONDS, rounds: ROUNDS, clients: CLIENTS, group: GROUP, sources: SOURCES },
  date: new Date().toISOString(),
  loadAverage: { atStart: loadAtStart, atEnd: loadAverage() },
  rounds,
  cpuUsPerLeadRounds: cpuRounds,
  median: Object.fromEntries(VARIANTS.map((variant) => [variant, median(variant)])),
  medianCpuUsPerLead: Object.fromEntries(VARIANTS.map((variant) => [variant, medianCpu(variant)])),
  walBytesPerLeadRounds: walRounds,
  walRecordBytesPerLeadRounds: walRecordRounds,
  medianWalBytesPerLead: Object.fromEntries(VARIANTS.map((variant) => [variant, medianWal(variant)])),
  ratio: {
    noEndpointVsBefore: round(median('no endpoint') / median('before'), 3),
    oneEndpointVsBefore: round(median('one endpoint') / median('before'), 3),
    oneEndpointVsNoEndpoint: round(median('one endpoint') / median('no endpoint'), 3),
    ...Object.fromEntries(
      CANDIDATES.map((candidate) => [
        `${candidate.name}VsOneEndpoint`,
        round(median(`${candidate.name}, one endpoint`) / median('one endpoint'), 3),
      ]),
    ),
  },
}
writeFileSync(join(ROOT, 'bench/results/outbox-ingest.json'), `${JSON.stringify(result, null, 2)}\n`)
console.log(JSON.stringify(result, null, 2))
