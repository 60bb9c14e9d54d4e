import postgres from 'postgres'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { runMigrations } from '../src/db/migrate'
import { newId } from '../src/lib/ids'
import { createMemoryLogger } from '../src/lib/logger'
import { SecretBox } from '../src/lib/secrets'
import { buildServices } from '../src/services'
import { BENCH_SECRETS_KEY, BENCH_WEBHOOK_ENV, freshDatabase, log, round } from './support'

/**
 * `bun run bench/webhook-worker-cost.ts`: what one delivery costs the worker, apart from the lead
 * path and from the machine's load. MESSAGES lead-sized messages for one endpoint are queued at
 * once; one worker (a replica's, DATABASE_POOL_SIZE 10) delivers them to a receiver in a process of
 * its own that answers 200 at once. Reported per delivery: the worker process's CPU time (user +
 * system), and the transactions the database committed meanwhile (every statement of the worker is
 * one). Wall time is printed too, but it follows the machine's load; the two counts much less.
 */
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5000)

const url = await freshDatabase('lead_capture_bench_worker_cost')
const config = loadConfig({
  DATABASE_URL: url,
  LOG_LEVEL: 'silent',
  DATABASE_POOL_SIZE: '10',
  ...BENCH_WEBHOOK_ENV,
})
const ctx = await createContext(config, { logger: createMemoryLogger('silent') })
await runMigrations(config, ctx.database, createMemoryLogger('silent'))
const sql = postgres(url, { max: 1, onnotice: () => {} })

const receiver = Bun.spawn(
  [
    process.execPath,
    '-e',
    `const s = Bun.serve({ port: 0, hostname: '127.0.0.1', async fetch(r) { await r.arrayBuffer(); return new Response('ok') } }); console.log(s.port)`,
  ],
  { stdout: 'pipe', stderr: 'inherit' },
)
const port = await (async () => {
  const { value } = await receiver.stdout.getReader().read()
  return Number(new TextDecoder().decode(value).trim())
})()

try {
  const organizationId = newId()
  const endpointId = newId()
  const now = new Date()
  await sql`insert into organizations (id, name, plan) values (${organizationId}, 'bench', 'pro')`
  await sql`insert into webhook_endpoints (id, organization_id, url, event_types, secret_ciphertext, created_at, updated_at)
    values (${endpointId}, ${organizationId}, ${`http://127.0.0.1:${port}/hook`}, '[]'::jsonb,
      ${new SecretBox(BENCH_SECRETS_KEY).seal(`whsec_${Buffer.alloc(24, 1).toString('base64')}`)}, ${now}, ${now})`
  const lead = {
    lead: {
      lead_id: newId(),
      source_id: newId(),
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'ada@example.com',
      phone_raw: '+44 20 7946 0958',
      phone_e164: '+442079460958',
      status: 'new',
      custom_fields: { company: 'Analytical Engines', message: 'x'.repeat(200) },
      attribution: { first_touch: { utm_source: 'newsletter', landing_page: 'https://example.com/' } },
      created_at: now.toISOString(),
      updated_at: now.toISOString(),
    },
    source: { id: newId(), name: 'Website contact form' },
    delivery_log_id: newId(),
  }
  await sql`insert into webhook_messages (id, organization_id, event_type, payload, created_at)
    select gen_random_uuid(), ${organizationId}, 'lead.created', ${sql.json(lead)}, ${now}
    from generate_series(1, ${MESSAGES})`
  await sql`insert into webhook_deliveries (message_id, endpoint_id, organization_id, event_type, next_attempt_at, created_at)
    select id, ${endpointId}, ${organizationId}, 'lead.created', ${now}, ${now} from webhook_messages`
  await sql`vacuum analyze`

  const commits = async () =>
    Number(
      (await sql`select xact_commit from pg_stat_database where datname = current_database()`)[0]!
        .xact_commit,
    )
  // The worker as a replica builds it (buildServices), never started: driven by deliverDue() alone.
  const worker = buildServices(ctx).deliveryWorker
  // Warm: the endpoint read, the statements prepared, a connection to the receiver.
  await worker.deliverDue()
  const [pending] = await sql<{ count: number }[]>`select count(*)::int as count from webhook_deliveries
    where status = 'pending'`
  log(
    `${MESSAGES} messages queued and delivered once to warm up (${pending!.count} left pending); all due again, measured now`,
  )
  await sql`update webhook_deliveries set status = 'pending', next_attempt_at = now() - interval '1 second'`
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const commitsBefore = await commits()
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  await worker.deliverDue()
  const wallMs = performance.now() - started
  const cpu = process.cpuUsage(cpuBefore)
  const statements = (await commits()) - commitsBefore - 1
  const [{ succeeded }] = (await sql`select count(*) filter (where status = 'succeeded')::int as succeeded
    from webhook_deliveries`) as unknown as [{ succeeded: number }]
  const result = {
    messages: MESSAGES,
    succeeded,
    wallMs: round(wallMs),
    deliveriesPerSecond: round((succeeded / wallMs) * 1000),
    cpuMicrosPerDelivery: round((cpu.user + cpu.system) / succeeded, 1),
    statementsPer1000Deliveries: round((statements / succeeded) * 1000, 1),
    loadAverage: (await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' '),
  }
  console.log(JSON.stringify(result, null, 2))
} finally {
  receiver.kill()
  await sql.end()
  await ctx.close()
}
