/**
 * `bun run bench:health`: the health view and the first logs page of a source with 1,000,000
 * delivery-log rows spread over 24 hours, on PostgreSQL. Needs DATABASE_URL (any database on the
 * server: the benchmark creates and drops its own, lead_capture_bench_health). Prints p50/p95 and
 * writes bench/results/health.json.
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
import { rollupDeliveryLogs } from '../src/modules/delivery-logs/rollup'
import { createSignedInUser, createSource } from '../test/helpers/factories'

const DATABASE = 'lead_capture_bench_health'
const ROWS = Number(process.env.BENCH_HEALTH_ROWS ?? 1_000_000)
const REQUESTS = Number(process.env.BENCH_HEALTH_REQUESTS ?? 200)
const WARMUP = 20
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

async function measure(name: string, url: string, token: string, count: number, warmup = WARMUP) {
  const headers = { authorization: `Bearer ${token}` }
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
      token,
      3,
      1,
    )

    started = performance.now()
    const rollup = await rollupDeliveryLogs(ctx)
    const rollupMs = Math.round(performance.now() - started)
    log(`roll-up of ${rollup.logRows} rows in ${rollupMs} ms`)
    await ctx.database.query('ANALYZE delivery_log_hourly', [])
    await ctx.database.query('ANALYZE delivery_log_latency_hourly', [])

    const health = await measure('health (roll-up + live tail)', `${base}/health`, token, REQUESTS)
    const logs = await measure('logs, first page (limit 50)', `${base}/logs`, token, REQUESTS)
    const filtered = await measure(
      'logs, first page ?outcome=error',
      `${base}/logs?outcome=error`,
      token,
      REQUESTS,
    )
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
      meets_target: health.p95_ms < TARGET_P95_MS && logs.p95_ms < TARGET_P95_MS,
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
