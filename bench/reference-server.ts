import { SQL } from 'bun'
import postgres from 'postgres'

/**
 * The yardsticks of the ingest benchmark: the least a lead endpoint can do on this stack. Bun.serve,
 * parse the JSON body, one INSERT, answer with the new id. No key check, limits, dedup, logging or
 * delivery log. REFERENCE_DRIVER picks the PostgreSQL client: `postgres.js` (the service's driver)
 * or `bun-sql` (Bun's built-in `Bun.sql`), so the benchmark shows what the driver alone is worth.
 * Run: DATABASE_URL=... PORT=... REFERENCE_DRIVER=bun-sql bun bench/reference-server.ts
 */
const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL is required')
const max = Number(process.env.DATABASE_POOL_SIZE ?? 10)
const driver = process.env.REFERENCE_DRIVER ?? 'postgres.js'

const CREATE = `create table if not exists bench_reference_leads (
  id uuid primary key, api_key text not null, email text, payload jsonb not null, created_at timestamptz not null default now()
)`

type Insert = (id: string, apiKey: string, email: string, body: Record<string, unknown>) => Promise<unknown>
let insert: Insert
if (driver === 'postgres.js') {
  const sql = postgres(url, { max, onnotice: () => {} })
  await sql.unsafe(CREATE)
  insert = (id, apiKey, email, body) =>
    sql`insert into bench_reference_leads (id, api_key, email, payload)
      values (${id}, ${apiKey}, ${email}, ${sql.json(body as never)})`
} else if (driver === 'bun-sql') {
  const sql = new SQL(url, { max })
  await sql.unsafe(CREATE)
  // The same statement and parameters; the body goes as JSON text cast to jsonb.
  insert = (id, apiKey, email, body) =>
    sql`insert into bench_reference_leads (id, api_key, email, payload)
      values (${id}, ${apiKey}, ${email}, ${JSON.stringify(body)}::jsonb)`
} else throw new Error(`REFERENCE_DRIVER: postgres.js or bun-sql, not ${driver}`)

const server = Bun.serve({
  port: Number(process.env.PORT ?? 3100),
  hostname: '127.0.0.1',
  // bench:ingest --replicas N runs N of these on one port, as it runs N service replicas.
  reusePort: process.env.REUSE_PORT === 'true',
  async fetch(request) {
    if (request.method === 'GET') return new Response('ok')
    const apiKey = new URL(request.url).pathname.split('/').pop() ?? ''
    const body = (await request.json()) as Record<string, unknown>
    const id = Bun.randomUUIDv7()
    await insert(id, apiKey, String(body.email ?? ''), body)
    return Response.json({ status: 'created', success: true, lead_id: id })
  },
})
console.log(`reference (${driver}) listening on ${server.port}`)
