/**
 * `bun run bench:health`: the health view and the first logs page of a source with 1,000,000
 * delivery-log rows spread over 24 hours, on PostgreSQL; the dashboard's pages of that source
 * (signed in with the session cookie); and the CSV export of 10,000 and 100,000 leads (time to the
 * last byte, peak RSS of the process above its level before the export). Needs DATABASE_URL (any
 * database on the server: the benchmark creates and drops its own, lead_capture_bench_health).
 * Prints p50/p95 and writes bench/results/health.json.
 *
 * Method, fixed before the first run: every timing is sequential requests over loopback to the
 * service in this process, measured to the last byte of the body; pages 200 requests after 20
 * warm-up ones; each export size 3 rounds, every round kept, RSS sampled every 10 ms while it runs
 * (the export's client is curl in a child process, so the RSS is the service's alone).
 *
 * BENCH_HEALTH_ONLY=export: only the export (no log rows, a few seconds); BENCH_HEALTH_EXPORT_SIZES
 * (default 10000,100000): the lead counts exported.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { createApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { runMigrations } from '../src/db/migrate'
import { createLogger } from '../src/lib/logger'
import type { RateLimiter } from '../src/lib/rate-limit'
import { SESSION_COOKIE } from '../src/modules/auth/credentials'
import { rollupDeliveryLogs } from '../src/modules/delivery-logs/rollup'
import { createSignedInUser, createSource } from '../test/helpers/factories'

// Overridable so two benchmarks on one server (parallel branches) do not drop each other's database.
const DATABASE = process.env.BENCH_HEALTH_DATABASE ?? 'lead_capture_bench_health'
const ROWS = Number(process.env.BENCH_HEALTH_ROWS ?? 1_000_000)
const REQUESTS = Number(process.env.BENCH_HEALTH_REQUESTS ?? 200)
const WARMUP = 20
const EXPORT_SIZES = (process.env.BENCH_HEALTH_EXPORT_SIZES ?? '10000,100000').split(',').map(Number)
const EXPORT_ROUNDS = 3
const EXPORT_TARGET_MS = 5000
// `export`: only the CSV export part (a short run while others share the machine).
const ONLY_EXPORT = process.env.BENCH_HEALTH_ONLY === 'export'
const TARGET_P95_MS = 50

const log = (message: string) => process.stderr.write(`[bench:health] ${message}\n`)

// The benchmark measures the database work, not the 100-per-minute management limit.
const unlimited: RateLimiter = {
  kind: 'memory',
  async check(rules) {
    const bucket = {
      bucket: rules[0]?.bucket ?? 'none',
      limit: 1e9,
      remaining: 1e9,
      resetMs: 0,
      allowed: true,
    }
    return { allowed: true, decisive: bucket, buckets: [bucket] }
  },
  state: () => 'up',
  async close() {},
}

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]!
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const sessionCookie = (token: string) => ({ cookie: `${SESSION_COOKIE}=${token}` })

async function measure(
  name: string,
  url: string,
  headers: Record<string, string>,
  count: number,
  warmup = WARMUP,
) {
  for (let index = 0; index < warmup; index++) await (await fetch(url, { headers })).arrayBuffer()
  const timings: number[] = []
  for (let index = 0; index < count; index++) {
    const started = performance.now()
    const response = await fetch(url, { headers })
    await response.arrayBuffer()
    timings.push(performance.now() - started)
    if (response.status !== 200) throw new Error(`${name}: HTTP ${response.status}`)
  }
  timings.sort((a, b) => a - b)
  const round = (value: number) => Math.round(value * 100) / 100
  const result = {
    requests: count,
    p50_ms: round(percentile(timings, 0.5)),
    p95_ms: round(percentile(timings, 0.95)),
    max_ms: round(timings.at(-1)!),
  }
  log(
    `${name}: p50 ${result.p50_ms} ms, p95 ${result.p95_ms} ms, max ${result.max_ms} ms (${count} sequential)`,
  )
  return result
}

/**
 * An organization with `size` leads, exported EXPORT_ROUNDS times through the API by curl in a
 * child process, which counts lines and bytes: the RSS measured is the service's. Peak RSS is
 * reported above the level just before each round.
 */
async function measureExport(ctx: Awaited<ReturnType<typeof createContext>>, origin: string, size: number) {
  const { organization, token } = await createSignedInUser(ctx)
  const started = performance.now()
  await ctx.database.query(
    `INSERT INTO leads (id, organization_id, email, email_normalized, first_name, last_name, phone_raw,
       phone_e164, status, custom_fields, attribution, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'lead' || n || '@example.com', 'lead' || n || '@example.com', 'Ada', 'Lovelace',
            '+44 20 7946 ' || lpad((n % 10000)::text, 4, '0'), '+44207946' || lpad((n % 10000)::text, 4, '0'), 'new',
            '{"company":"Analytical Engines, Ltd"}'::jsonb, '{"utm_source":"newsletter"}'::jsonb, now(), now()
     FROM generate_series(1, $2::int) AS n`,
    [organization.id, size],
  )
  await ctx.database.query('ANALYZE leads', [])
  log(`seeded ${size} leads in ${Math.round(performance.now() - started)} ms`)
  const rounds = []
  for (let round = 0; round < EXPORT_ROUNDS; round++) {
    Bun.gc(true)
    const baseline = process.memoryUsage().rss
    let peak = baseline
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss)
    }, 10)
    const begun = performance.now()
    // The client is curl in a child process, so the RSS sampled is the service's alone (a fetch
    // in this process would add the garbage of every chunk it receives to the figure).
    const client = Bun.spawn(
      ['sh', '-c', 'curl -sS --fail -H "authorization: Bearer $TOKEN" "$URL" | wc -lc'],
      { env: { ...process.env, TOKEN: token, URL: `${origin}/api/v2/leads/export.csv` }, stdout: 'pipe' },
    )
    const [rows, bytes] = (await new Response(client.stdout).text()).trim().split(/\s+/).map(Number) as [
      number,
      number,
    ]
    if ((await client.exited) !== 0) throw new Error('export: curl failed')
    const duration = performance.now() - begun
    clearInterval(sampler)
    peak = Math.max(peak, process.memoryUsage().rss)
    if (rows !== size + 1) throw new Error(`export: ${rows} lines for ${size} leads`)
    // The peak includes garbage the collector had not reclaimed yet; after a full collection
    // what is left above the start is what the export kept.
    Bun.gc(true)
    const after = process.memoryUsage().rss
    const megabytes = (value: number) => Math.round((value / 1048576) * 10) / 10
    const result = {
      duration_ms: Math.round(duration),
      bytes,
      rss_before_mb: Math.round(baseline / 1048576),
      peak_rss_above_before_mb: megabytes(peak - baseline),
      rss_after_gc_above_before_mb: megabytes(after - baseline),
    }
    log(`export of ${size} leads, round ${round + 1}: ${JSON.stringify(result)}`)
    rounds.push(result)
  }
  return { leads: size, rounds }
}

async function measureExports(ctx: Awaited<ReturnType<typeof createContext>>, origin: string) {
  const exports = []
  for (const size of EXPORT_SIZES) exports.push(await measureExport(ctx, origin, size))
  return exports
}

async function main() {
  const adminUrl = process.env.DATABASE_URL
  if (!adminUrl)
    throw new Error('DATABASE_URL is required (a PostgreSQL server; the benchmark makes its own database)')
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`)
  await admin.unsafe(`CREATE DATABASE ${DATABASE}`)
  const url = new URL(adminUrl)
  url.pathname = `/${DATABASE}`

  const config = loadConfig({ DATABASE_URL: url.toString(), LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: '0' })
  const logger = createLogger('warn', (line) => process.stderr.write(line))
  const ctx = await createContext(config, { limiter: unlimited, logger })
  try {
    await runMigrations(config, ctx.database, logger)
    if (ONLY_EXPORT) {
      const app = createApp(ctx).listen({ hostname: '127.0.0.1', port: 0 })
      const exports = await measureExports(ctx, `http://127.0.0.1:${app.server!.port}`)
      await app.stop(true)
      console.log(
        JSON.stringify(
          { benchmark: 'bench/health.ts (export only)', date: new Date().toISOString(), exports },
          null,
          2,
        ),
      )
      return
    }
    const { organization, token } = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, organization.id)

    // 1M rows over the 24 hours before now: 85% created/updated, 5% spam, 3% error, 7% rejected
    // (400, 403, 413, and 429 rows standing for 5 requests each).
    let started = performance.now()
    const now = Date.now()
    await ctx.database.query(
      `INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason,
         lead_id, client_ip, origin, user_agent, body_bytes, body, spam_reasons, duration_ms, repeat_count)
       SELECT gen_random_uuid(), $1, $2,
              $3::timestamptz - make_interval(secs => (n::float8 / $4) * 86400),
              'POST', v.http_status, v.outcome, v.reason,
              CASE WHEN v.outcome IN ('created', 'updated') THEN gen_random_uuid() END,
              '203.0.113.' || (n % 250), 'https://www.example.com', 'Mozilla/5.0 (bench)', 64,
              '{"email":"lead' || n || '@example.com","first_name":"Ada"}',
              CASE WHEN v.outcome = 'spam' THEN '["submitted_too_fast"]'::jsonb ELSE '[]'::jsonb END,
              (1 + random() * 20)::real, v.repeat_count
       FROM generate_series(1, $4::int) AS n
       CROSS JOIN LATERAL (SELECT CASE
           WHEN n % 100 < 80 THEN 'created' WHEN n % 100 < 85 THEN 'updated' WHEN n % 100 < 90 THEN 'spam'
           WHEN n % 100 < 93 THEN 'error' ELSE 'rejected' END AS outcome, n % 100 AS slot) s
       CROSS JOIN LATERAL (SELECT s.outcome,
           CASE WHEN s.slot < 93 THEN 200 WHEN s.slot < 95 THEN 400 WHEN s.slot < 96 THEN 403
                WHEN s.slot < 97 THEN 413 ELSE 429 END::smallint AS http_status,
           CASE WHEN s.outcome = 'spam' THEN 'submitted_too_fast' WHEN s.outcome = 'error' THEN 'missing_contact'
                WHEN s.slot >= 93 AND s.slot < 95 THEN 'invalid_json' WHEN s.slot = 95 THEN 'ip_not_allowed'
                WHEN s.slot = 96 THEN 'payload_too_large' WHEN s.slot >= 97 THEN 'rate_limited' END AS reason,
           CASE WHEN s.slot >= 97 THEN 5 ELSE 1 END AS repeat_count) v`,
      [source.id, organization.id, new Date(now).toISOString(), ROWS],
    )
    await ctx.database.query('ANALYZE delivery_logs', [])
    const seedMs = Math.round(performance.now() - started)
    log(`seeded ${ROWS} rows in ${seedMs} ms`)

    // The live aggregate over 1M rows can take longer than Bun's default 10 s idle timeout.
    const app = createApp(ctx).listen({ hostname: '127.0.0.1', port: 0, idleTimeout: 255 })
    const base = `http://127.0.0.1:${app.server!.port}/api/webhook/sources/${source.id}`

    // Before the roll-up job's first run, health aggregates the 24 hours live: the naive cost.
    const liveOnly = await measure(
      'health, before the first roll-up (live aggregate)',
      `${base}/health`,
      bearer(token),
      3,
      1,
    )

    started = performance.now()
    const rollup = await rollupDeliveryLogs(ctx)
    const rollupMs = Math.round(performance.now() - started)
    log(`roll-up of ${rollup.logRows} rows in ${rollupMs} ms`)
    await ctx.database.query('ANALYZE delivery_log_hourly', [])
    await ctx.database.query('ANALYZE delivery_log_latency_hourly', [])

    const health = await measure('health (roll-up + live tail)', `${base}/health`, bearer(token), REQUESTS)
    const logs = await measure('logs, first page (limit 50)', `${base}/logs`, bearer(token), REQUESTS)
    const filtered = await measure(
      'logs, first page ?outcome=error',
      `${base}/logs?outcome=error`,
      bearer(token),
      REQUESTS,
    )

    // The dashboard's pages of the same source: the services above plus rendering.
    const origin = `http://127.0.0.1:${app.server!.port}`
    const pages = {
      sources_list: await measure(
        'page /app/sources',
        `${origin}/app/sources`,
        sessionCookie(token),
        REQUESTS,
      ),
      source: await measure(
        'page /app/sources/:id',
        `${origin}/app/sources/${source.id}`,
        sessionCookie(token),
        REQUESTS,
      ),
      logs: await measure(
        'page /app/sources/:id/logs',
        `${origin}/app/sources/${source.id}/logs`,
        sessionCookie(token),
        REQUESTS,
      ),
      logs_filtered: await measure(
        'page /app/sources/:id/logs?outcome=error',
        `${origin}/app/sources/${source.id}/logs?outcome=error`,
        sessionCookie(token),
        REQUESTS,
      ),
    }

    const exports = await measureExports(ctx, origin)
    await app.stop(true)

    const results = {
      benchmark: 'bench/health.ts',
      date: new Date().toISOString(),
      machine: { cpus: navigator.hardwareConcurrency, bun: Bun.version },
      rows: ROWS,
      seed_ms: seedMs,
      rollup: { log_rows: rollup.logRows, duration_ms: rollupMs },
      target_p95_ms: TARGET_P95_MS,
      health_before_first_rollup: liveOnly,
      health,
      logs_first_page: logs,
      logs_first_page_outcome_filter: filtered,
      dashboard_pages: pages,
      csv_export: { target_ms: EXPORT_TARGET_MS, rounds: EXPORT_ROUNDS, sizes: exports },
      meets_target: health.p95_ms < TARGET_P95_MS && logs.p95_ms < TARGET_P95_MS,
      dashboard_meets_target: Object.values(pages).every((page) => page.p95_ms < TARGET_P95_MS),
      export_meets_target: exports.every((entry) =>
        entry.rounds.every((round) => round.duration_ms < EXPORT_TARGET_MS),
      ),
    }
    const directory = join(import.meta.dir, 'results')
    mkdirSync(directory, { recursive: true })
    writeFileSync(join(directory, 'health.json'), `${JSON.stringify(results, null, 2)}\n`)
    console.log(JSON.stringify(results, null, 2))
  } finally {
    await ctx.close()
    await admin.unsafe(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`)
    await admin.end()
  }
}

await main()
