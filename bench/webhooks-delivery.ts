import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { provisionSources } from './provision'
import {
  addWebhookEndpoint,
  BENCH_WEBHOOK_ENV,
  freePort,
  freshDatabase,
  log,
  percentile,
  ROOT,
  round,
  spawnService,
} from './support'

/**
 * `bun run bench:webhooks`: the service at a fixed rate of new leads (open loop, RATE per second for
 * SECONDS, after WARMUP_SECONDS), first with no webhook endpoint, then with one endpoint subscribed
 * to `lead.created` whose receiver (a Bun.serve in this process, on loopback) answers 200. Same
 * process, same database, one phase after the other. Reports per phase the inbound latency
 * (from when each request was due), and with the endpoint the delivery lag of every event (receiver
 * arrival minus the lead's 200), how many were missing after a 30 s grace, and duplicates.
 */
const RATE = Number(process.env.BENCH_RATE ?? 1000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 5)
// Every key stays under its 60 per minute over the warm-up and both phases.
const SOURCES = Number(process.env.BENCH_SOURCES ?? 3000)

const url = await freshDatabase(process.env.BENCH_DATABASE ?? 'lead_capture_bench_webhooks')
const port = await freePort()
const service = await spawnService({
  DATABASE_URL: url,
  PORT: String(port),
  ...BENCH_WEBHOOK_ENV,
  LOG_LEVEL: 'warn',
})
const keys = await provisionSources(url, SOURCES)
const sql = postgres(url, { max: 1, onnotice: () => {} })

// Times on one clock across processes: milliseconds since the epoch, with fractions.
const epochMs = () => performance.timeOrigin + performance.now()
/**
 * The receiver: in this process by default (the method of the figures in docs/benchmarks.md), or
 * with BENCH_RECEIVER=process in a process of its own, so that receiving 1,000 webhooks a second does
 * not share the event loop that sends the leads and times their answers.
 */
const RECEIVER_CODE = `
const arrivals = new Map()
const now = () => performance.timeOrigin + performance.now()
const server = Bun.serve({ port: 0, hostname: '127.0.0.1', async fetch(request) {
  if (request.method === 'GET') return Response.json(request.url.endsWith('/count') ? arrivals.size : [...arrivals])
  const body = await request.json()
  const list = arrivals.get(body.data.lead.lead_id) ?? []
  list.push(now())
  arrivals.set(body.data.lead.lead_id, list)
  return new Response('ok')
} })
console.log(server.port)
`
const receiverProcess =
  process.env.BENCH_RECEIVER === 'process'
    ? Bun.spawn([process.execPath, '-e', RECEIVER_CODE], { stdout: 'pipe', stderr: 'inherit' })
    : null
const arrivals = new Map<string, number[]>()
const receiver = receiverProcess
  ? {
      port: await (async () => {
        const { value } = await receiverProcess.stdout.getReader().read()
        return Number(new TextDecoder().decode(value).trim())
      })(),
      stop: (_closeActiveConnections?: boolean) => receiverProcess.kill(),
    }
  : Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(request) {
        const body = (await request.json()) as { data: { lead: { lead_id: string } } }
        const list = arrivals.get(body.data.lead.lead_id) ?? []
        list.push(epochMs())
        arrivals.set(body.data.lead.lead_id, list)
        return new Response('ok')
      },
    })
const receiverUrl = `http://127.0.0.1:${receiver.port}`
async function arrivalCount(): Promise<number> {
  if (!receiverProcess) return arrivals.size
  return (await (await fetch(`${receiverUrl}/count`)).json()) as number
}
async function collectArrivals(): Promise<Map<string, number[]>> {
  if (!receiverProcess) return arrivals
  return new Map((await (await fetch(`${receiverUrl}/all`)).json()) as Array<[string, number[]]>)
}

interface Phase {
  sent: number
  ok: number
  failed: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  acknowledged: Map<string, number>
}

let keyIndex = 0
async function run(seconds: number): Promise<Phase> {
  const total = Math.round(RATE * seconds)
  const interval = 1000 / RATE
  const latencies: number[] = []
  const acknowledged = new Map<string, number>()
  let ok = 0
  let failed = 0
  const pending: Promise<void>[] = []
  const start = epochMs()
  for (let next = 0; next < total; ) {
    const current = epochMs()
    while (next < total && start + next * interval <= current) {
      const due = start + next * interval
      const key = keys[keyIndex++ % keys.length]!
      pending.push(
        fetch(`${service.url}/api/webhook/lead/${key}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: `bench-${crypto.randomUUID()}@example.com`, first_name: 'Ada' }),
        }).then(
          async (response) => {
            const body = (await response.json()) as { lead_id?: string }
            const at = epochMs()
            latencies.push(at - due)
            if (response.status === 200 && body.lead_id) {
              ok++
              acknowledged.set(body.lead_id, at)
            } else failed++
          },
          () => {
            failed++
          },
        ),
      )
      next++
    }
    await Bun.sleep(1)
  }
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  return {
    sent: total,
    ok,
    failed,
    p50Ms: round(percentile(latencies, 0.5)),
    p99Ms: round(percentile(latencies, 0.99)),
    maxMs: round(latencies[latencies.length - 1] ?? 0),
    acknowledged,
  }
}

const summary = (phase: Phase) => {
  const { acknowledged: _acknowledged, ...figures } = phase
  return figures
}

try {
  log(`warm-up ${WARMUP_SECONDS}s at ${RATE}/s`)
  await run(WARMUP_SECONDS)
  log(`no endpoint: ${SECONDS}s at ${RATE}/s`)
  const without = await run(SECONDS)

  await addWebhookEndpoint(sql, `http://127.0.0.1:${receiver.port}/hook`)
  log(`one endpoint (lead.created): ${SECONDS}s at ${RATE}/s`)
  const withEndpoint = await run(SECONDS)

  const graceEnd = epochMs() + 30_000
  while (epochMs() < graceEnd && (await arrivalCount()) < withEndpoint.acknowledged.size) await Bun.sleep(100)
  const arrived = await collectArrivals()
  const lags: number[] = []
  let missing = 0
  let duplicates = 0
  for (const [leadId, ackAt] of withEndpoint.acknowledged) {
    const seen = arrived.get(leadId)
    if (!seen) {
      missing++
      continue
    }
    if (seen.length > 1) duplicates++
    lags.push(seen[0]! - ackAt)
  }
  lags.sort((a, b) => a - b)
  const result = {
    method: {
      rate: RATE,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      sources: SOURCES,
      receiver: receiverProcess ? 'own process' : 'bench process',
    },
    noEndpoint: summary(without),
    oneEndpoint: summary(withEndpoint),
    delivery: {
      events: withEndpoint.acknowledged.size,
      delivered: lags.length,
      missing,
      duplicates,
      lagP50Ms: round(percentile(lags, 0.5)),
      lagP99Ms: round(percentile(lags, 0.99)),
      lagMaxMs: round(lags[lags.length - 1] ?? 0),
      within5s: lags.filter((lag) => lag <= 5000).length,
    },
    peakRssMb: round(service.peakRssBytes() / 1024 / 1024, 1),
  }
  writeFileSync(join(ROOT, 'bench/results/webhooks-delivery.json'), `${JSON.stringify(result, null, 2)}\n`)
  console.log(JSON.stringify(result, null, 2))
} finally {
  receiver.stop(true)
  await sql.end()
  await service.stop()
}
