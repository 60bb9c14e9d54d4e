import { parseArgs } from 'node:util'
import { createApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { createLogger } from '../src/lib/logger'
import { buildServices } from '../src/services'
import { log } from './support'

/**
 * `bun run bench/inbound-framework.ts [--pairs 3] [--seconds 8] [--connections 50] [--no-access-line]`: what the
 * framework costs the webhook POST, apart from the pipeline. The app is built in this process with
 * the inbound service's `receive` answering at once (the rate-limit headers of a real 200 written,
 * the outcome of a created lead returned), so the process's CPU per request is the HTTP server,
 * createApp's wrapper, and whatever serves the route: the direct path (src/modules/inbound/direct-post.ts,
 * the key as issued) or Elysia's lifecycle (the same URL with a query string, a form the direct path
 * leaves to the lifecycle; its access line is the same line, the query string not being logged).
 * A third form sends the key with its `_` percent-encoded, also served by the lifecycle: its access
 * line masks an encoded key, which costs more than masking a plain one (docs/benchmarks.md A47:
 * this bench's first version compared the direct path with that form only). wrk (1 thread, separate
 * process) saturates it for each form in turn, A B C D D C B A …; CPU is this process's
 * `process.cpuUsage()` over the run. The access lines are formatted and dropped (the sink writes
 * nothing). A bare `Bun.serve` answering the same body and headers is measured with them, as the
 * floor. No form reads the body.
 *
 * Needs a database only to start (DATABASE_URL, else in-memory PGlite); no request reaches it.
 */
const cli = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    pairs: { type: 'string' },
    seconds: { type: 'string' },
    connections: { type: 'string' },
    'no-access-line': { type: 'boolean' },
  },
}).values
const PAIRS = Number(cli.pairs ?? 3)
const SECONDS = Number(cli.seconds ?? 8)
const CONNECTIONS = Number(cli.connections ?? 50)

const config = loadConfig({ ...process.env, LOG_LEVEL: 'info', PLATFORM_RATE_LIMIT_PER_MIN: '1000000000' })
// --no-access-line: the logger at `warn`, so no form formats its access line (its cost, by difference).
const ACCESS_LINE = cli['no-access-line'] !== true
const ctx = await createContext(config, {
  logger: createLogger(ACCESS_LINE ? 'info' : 'warn', () => {}),
  inMemoryDatabase: true,
})
const services = buildServices(ctx)
const LEAD_ID = '01a21f7f-abd1-77a5-8676-e5d370c5243a'
services.inbound.receive = async (call) => {
  Object.assign(call.headers, {
    'x-ratelimit-limit': '60',
    'x-ratelimit-remaining': '59',
    'x-ratelimit-reset': '60',
  })
  return { status: 'created', success: true, lead_id: LEAD_ID }
}
const app = createApp(ctx, { services }).listen({ port: 0, hostname: '127.0.0.1' })
const port = app.server!.port

// The floor: a bare Bun.serve in this process answering the same body with the same headers.
const bare = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: () =>
    new Response(JSON.stringify({ status: 'created', success: true, lead_id: LEAD_ID }), {
      headers: {
        'x-request-id': crypto.randomUUID(),
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '59',
        'x-ratelimit-reset': '60',
        'content-type': 'application/json;charset=utf-8',
      },
    }),
})

const KEY = `flwh_${'a'.repeat(38)}`
const forms = [
  { name: 'direct path', url: `http://127.0.0.1:${port}/api/webhook/lead/${KEY}` },
  { name: "Elysia's lifecycle", url: `http://127.0.0.1:${port}/api/webhook/lead/${KEY}?via=lifecycle` },
  {
    name: "Elysia's lifecycle, the key percent-encoded",
    url: `http://127.0.0.1:${port}/api/webhook/lead/${KEY.replace('_', '%5F')}`,
  },
  { name: 'bare Bun.serve', url: `http://127.0.0.1:${bare.port}/api/webhook/lead/${KEY}` },
]
const script = `${process.env.TMPDIR ?? '/tmp'}/inbound-framework-${process.pid}.lua`
await Bun.write(
  script,
  `wrk.method = "POST"
wrk.body = '{"first_name":"Bench","last_name":"User","email":"bench@example.com","status":"new","company":"Acme Ltd"}'
wrk.headers["Content-Type"] = "application/json"
`,
)

async function measure(url: string) {
  // A short warm-up of this form, so both are compiled before they are measured.
  await Bun.spawn(['wrk', '-t1', `-c${CONNECTIONS}`, '-d2s', '-s', script, url], {
    stdout: 'ignore',
  }).exited
  const before = process.cpuUsage()
  const child = Bun.spawn(['wrk', '-t1', `-c${CONNECTIONS}`, `-d${SECONDS}s`, '-s', script, url], {
    stdout: 'pipe',
  })
  const output = await new Response(child.stdout).text()
  await child.exited
  const used = process.cpuUsage(before)
  const requests = Number(output.match(/(\d+) requests in/)?.[1])
  const non2xx = Number(output.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0)
  if (!requests) throw new Error(`unexpected wrk output:\n${output}`)
  return {
    rps: Math.round(requests / SECONDS),
    cpuUsPerRequest: Math.round(((used.user + used.system) / requests) * 100) / 100,
    non2xx,
  }
}

const results = new Map<string, Array<{ rps: number; cpuUsPerRequest: number; non2xx: number }>>(
  forms.map((form) => [form.name, []]),
)
try {
  for (let pass = 0; pass < PAIRS; pass++) {
    for (const form of pass % 2 === 0 ? forms : [...forms].reverse()) {
      const figures = await measure(form.url)
      results.get(form.name)!.push(figures)
      log(`${form.name} (pass ${pass + 1}): ${JSON.stringify(figures)}`)
    }
  }
} finally {
  app.server?.stop(true)
  bare.stop(true)
  await ctx.close()
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
console.log(`| form | CPU µs per request (runs) | requests/s (runs) | non-2xx |`)
console.log(`|---|---|---|---|`)
for (const [name, runs] of results) {
  const cpu = runs.map((run) => run.cpuUsPerRequest)
  const rps = runs.map((run) => run.rps)
  console.log(
    `| ${name} | ${median(cpu)} (${cpu.join(' / ')}) | ${median(rps)} (${rps.join(' / ')}) | ${runs.map((run) => run.non2xx).join('/')} |`,
  )
}
console.log(
  `(${CONNECTIONS} connections, ${SECONDS} s a run, medians; ${PAIRS} passes, the order reversed every other pass; access lines ${ACCESS_LINE ? 'formatted' : 'off'})`,
)
