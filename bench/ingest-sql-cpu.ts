import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { SQL } from 'bun'
import { newId } from '../src/lib/ids'

/**
 * `DATABASE_URL=… bun bench/ingest-sql-cpu.ts --statement 'select … from ingest_leads($1::text::jsonb)'
 * [--group 16] [--calls 300] [--rounds 3]`: the PostgreSQL backend's CPU time per lead of one
 * group-commit statement, called one group after another on one connection (Bun.sql, prepared),
 * each group of new leads on distinct sources of the database (made with the CLI beforehand: a few
 * thousand, so no source nears its 60 a minute). CPU is the backend's utime + stime
 * (/proc/<pg_backend_pid()>/stat: PostgreSQL on the same host), which the machine's other load
 * distorts far less than wall time; several --statement options run alternately, round by round,
 * so variants of ingest_leads() (created beside it under other names) compare in one run. The
 * items are shaped as the service sends them (src/modules/inbound/repository.ts, ingestItem).
 */
const cli = parseArgs({
  options: {
    statement: { type: 'string', multiple: true },
    group: { type: 'string' },
    calls: { type: 'string' },
    rounds: { type: 'string' },
  },
}).values
const GROUP = Number(cli.group ?? 16)
const CALLS = Number(cli.calls ?? 300)
const ROUNDS = Number(cli.rounds ?? 3)
const statements = cli.statement ?? []
if (statements.length === 0) throw new Error('at least one --statement')

const sql = new SQL(process.env.DATABASE_URL!, { max: 1, prepare: true })
const sources = (await sql`select id, organization_id from webhook_sources order by random()`) as Array<{
  id: string
  organization_id: string
}>
const pid = ((await sql`select pg_backend_pid() as pid`) as Array<{ pid: number }>)[0]!.pid
const cpuMs = () => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

let next = 0
let serial = 0
const tag = Date.now().toString(36)
function group(): string {
  const items = Array.from({ length: GROUP }, (_, idx) => {
    const source = sources[next++ % sources.length]!
    const email = `sqlcpu-${tag}-${serial++}@example.com`
    const id = newId()
    const body = JSON.stringify({
      first_name: 'Bench',
      last_name: 'User',
      email,
      status: 'new',
      company: 'Acme Ltd',
    })
    return {
      idx,
      organization_id: source.organization_id,
      source_id: source.id,
      // one id: the current function gives a created lead its log id; older ones read new_lead_id
      new_lead_id: id,
      log_id: id,
      first_name: 'Bench',
      last_name: 'User',
      email,
      email_normalized: email,
      phone_raw: null,
      phone_e164: null,
      status: 'new',
      custom_fields: { company: 'Acme Ltd' },
      attribution: {},
      received_at: new Date().toISOString(),
      client_ip: '127.0.0.1',
      origin: null,
      user_agent: 'wrk',
      body_bytes: body.length,
      body,
      body_truncated: false,
      duration_ms: 0.4,
    }
  })
  return JSON.stringify(items)
}

const results = new Map<string, number[]>(statements.map((s) => [s, []]))
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? statements : [...statements].reverse()
  for (const statement of order) {
    const groups = Array.from({ length: CALLS }, group)
    await sql.unsafe(statement, [groups[0]!]) // prepared, plans warm
    const before = cpuMs()
    const started = performance.now()
    for (let call = 1; call < CALLS; call++) await sql.unsafe(statement, [groups[call]!])
    const used = cpuMs() - before
    const perLead = (used * 1000) / ((CALLS - 1) * GROUP)
    results.get(statement)!.push(Math.round(perLead * 10) / 10)
    console.error(
      `round ${round + 1}: ${perLead.toFixed(1)} µs backend CPU per lead, ${(((performance.now() - started) * 1000) / ((CALLS - 1) * GROUP)).toFixed(1)} µs wall: ${statement}`,
    )
  }
}
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
for (const [statement, runs] of results) {
  const sorted = [...runs].sort((a, b) => a - b)
  console.log(
    `${sorted[Math.floor(sorted.length / 2)]} µs/lead (${runs.join(' / ')}), group ${GROUP}: ${statement}`,
  )
}
console.log(`load average at the end: ${load}`)
await sql.close()
