import postgres from 'postgres'

/**
 * The yardstick of the ingest benchmark: the least a lead endpoint can do on this stack. Bun.serve,
 * parse the JSON body, one INSERT with postgres.js, answer with the new id. No key check, limits,
 * dedup, logging or delivery log. Run: DATABASE_URL=... PORT=... bun bench/reference-server.ts
 */
const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL is required')
const sql = postgres(url, { max: Number(process.env.DATABASE_POOL_SIZE ?? 10), onnotice: () => {} })
await sql`create table if not exists bench_reference_leads (
  id uuid primary key, api_key text not null, email text, payload jsonb not null, created_at timestamptz not null default now()
)`

const server = Bun.serve({
  port: Number(process.env.PORT ?? 3100),
  hostname: '127.0.0.1',
  async fetch(request) {
    if (request.method === 'GET') return new Response('ok')
    const apiKey = new URL(request.url).pathname.split('/').pop() ?? ''
    const body = (await request.json()) as Record<string, unknown>
    const id = Bun.randomUUIDv7()
    await sql`insert into bench_reference_leads (id, api_key, email, payload)
      values (${id}, ${apiKey}, ${String(body.email ?? '')}, ${sql.json(body as never)})`
    return Response.json({ status: 'created', success: true, lead_id: id })
  },
})
console.log(`reference listening on ${server.port}`)
