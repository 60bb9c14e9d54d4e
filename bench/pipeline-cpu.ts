import { readFileSync } from 'node:fs'
import { createApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { FakeClock } from '../src/lib/clock'
import { requestPath } from '../src/lib/http'
import { MemoryRateLimiter } from '../src/lib/rate-limit'
import { buildServices } from '../src/services'
import { answerWithoutWork } from './floor-server'
import { prepareBenchDatabase, runTag } from './ingest'
import { freePort, log, medianBy, round, runWrk } from './support'

/**
 * `bun run bench:pipeline`: CPU of the Bun process per inbound request with the I/O clients taken
 * out, against a bare `Bun.serve` that parses the JSON and answers. The service runs in this process
 * with the in-process limiter and the lead write replaced by an immediate answer (the source lookups
 * still go to PostgreSQL once per key, then come from the cache), so what is measured is the
 * framework, the hooks, validation, normalisation and the access log. wrk drives both; CPU is read
 * from /proc/self/stat around the measured run. A diagnostic for the ingest ratio, not a target.
 *
 * The shared input guard (src/lib/input-guard.ts) is measured the same way: a second app on its own
 * context whose guard does nothing, run in the same rounds, so the difference is the guard's cost
 * on the inbound path (target: at most 3 % of the pipeline's CPU). That difference is a few µs in
 * ~100 and within the noise of a shared machine, so the guard's inbound work is also timed directly:
 * the same calls the plugin and the inbound service make per request (path, refusal lookup,
 * parameter check, depth scan, escape test), on the wrk script's bodies, in a loop of CPU time.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

function processCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')
  // utime and stime, fields 14 and 15 of stat(5), in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10
}

async function cpuPerRequest(
  url: string,
  keysFile: string,
  tag: string,
): Promise<{ rps: number; cpuUs: number }> {
  await runWrk({ url, keysFile, tag: `${tag}-warm`, seconds: 3, connections: 50, threads: 1 })
  const before = processCpuMs()
  const result = await runWrk({ url, keysFile, tag, seconds: SECONDS, connections: 50, threads: 1 })
  const cpuMs = processCpuMs() - before
  if (result.non2xx > 0) throw new Error(`${result.non2xx} requests were not answered 2xx`)
  return { rps: result.requestsPerSecond, cpuUs: round((cpuMs * 1000) / result.requests, 1) }
}

const { databaseUrl, keysFile } = await prepareBenchDatabase()

const barePort = await freePort()
const bare = Bun.serve({ port: barePort, hostname: '127.0.0.1', fetch: answerWithoutWork })

const servicePort = await freePort()
const config = loadConfig({
  DATABASE_URL: databaseUrl,
  PORT: String(servicePort),
  HOST: '127.0.0.1',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
})
// The access log goes where the service's would: this process's stdout (run with `> /dev/null`).
// A clock moved a minute on before each round, so no key reaches its 60 per minute across rounds.
const clock = new FakeClock(Date.now())
const ctx = await createContext(config, { limiter: new MemoryRateLimiter(), clock })
const services = buildServices(ctx)
const writer = services.inbound.writer
writer.ingest = async () => ({ leadId: Bun.randomUUIDv7(), outcome: 'created' })
const service = createApp(ctx, { services }).listen({ port: servicePort, hostname: '127.0.0.1' })

// The same pipeline with the input guard switched off (every check a no-op).
const unguardedPort = await freePort()
const unguardedCtx = await createContext(config, { limiter: new MemoryRateLimiter(), clock })
const unguardedServices = buildServices(unguardedCtx)
unguardedServices.inbound.writer.ingest = writer.ingest
const off = unguardedServices.inputGuard
off.checkJsonDepth = () => {}
off.unstorable = () => []
off.checkRequest = () => {}
off.checkDeclaredLength = () => {}
off.arm = () => {}
const unguarded = createApp(unguardedCtx, { services: unguardedServices }).listen({
  port: unguardedPort,
  hostname: '127.0.0.1',
})

const rows: Array<{ round: number; bare: number; service: number; serviceRps: number; unguarded: number }> =
  []
try {
  for (let index = 1; index <= ROUNDS; index++) {
    const baseline = await cpuPerRequest(
      `http://127.0.0.1:${barePort}`,
      keysFile,
      runTag('bare', String(index)),
    )
    // Alternate which of the two apps runs first, so neither gains from running later.
    const measure = async (port: number, tag: string) => {
      clock.advance(61_000)
      return cpuPerRequest(`http://127.0.0.1:${port}`, keysFile, runTag(tag, String(index)))
    }
    let pipeline: { rps: number; cpuUs: number }
    let withoutGuard: { rps: number; cpuUs: number }
    if (index % 2 === 1) {
      pipeline = await measure(servicePort, 'pipe')
      withoutGuard = await measure(unguardedPort, 'unguarded')
    } else {
      withoutGuard = await measure(unguardedPort, 'unguarded')
      pipeline = await measure(servicePort, 'pipe')
    }
    rows.push({
      round: index,
      bare: baseline.cpuUs,
      service: pipeline.cpuUs,
      serviceRps: pipeline.rps,
      unguarded: withoutGuard.cpuUs,
    })
    log(
      `round ${index}: bare Bun.serve ${baseline.cpuUs} µs/request, inbound pipeline ${pipeline.cpuUs} µs/request, without the input guard ${withoutGuard.cpuUs} µs/request`,
    )
  }
} finally {
  bare.stop(true)
  await service.stop()
  await unguarded.stop()
  await ctx.close()
  await unguardedCtx.close()
}
const median = (values: number[]) => medianBy(values, (value) => value)
console.error(
  `Bun CPU per request (median of ${ROUNDS}): bare ${median(rows.map((row) => row.bare))} µs, inbound pipeline without I/O ${median(rows.map((row) => row.service))} µs`,
)
const guarded = median(rows.map((row) => row.service))
const unguardedMedian = median(rows.map((row) => row.unguarded))
console.error(
  `input guard: ${round(guarded - unguardedMedian, 1)} µs/request of ${guarded} µs = ${round(((guarded - unguardedMedian) / guarded) * 100, 2)} % of the inbound pipeline's CPU (medians; without the guard ${unguardedMedian} µs)`,
)

/** CPU µs of the guard's work for one inbound request, on bodies shaped like the wrk script's. */
function guardWorkPerRequest(): number {
  const guard = services.inputGuard
  const key = readFileSync(keysFile, 'utf8').split('\n')[0]!
  const requests = Array.from({ length: 1000 }, (_, index) => {
    const text = `{"first_name":"Bench","last_name":"User","email":"run-1-${index}@example.com","status":"new","company":"Acme Ltd"}`
    const request = new Request(`http://127.0.0.1/api/webhook/lead/${key}`, { method: 'POST', body: text })
    return { request, text }
  })
  const iterations = 1_000_000
  const run = (count: number) => {
    let escapes = 0
    for (let index = 0; index < count; index++) {
      const { request, text } = requests[index % requests.length]!
      if (!requestPath(request).startsWith('/api/webhook/lead/')) throw new Error('not the inbound path')
      if (guard.refusalOf(request)) throw new Error('refused')
      guard.checkRequest({ query: {}, params: { api_key: key } })
      guard.checkJsonDepth(text)
      if (text.includes('\\u')) escapes++
    }
    return escapes
  }
  run(100_000) // warm-up: let the JIT compile the calls
  const before = process.cpuUsage()
  run(iterations)
  const used = process.cpuUsage(before)
  return round((used.user + used.system) / iterations, 3)
}
const guardUs = guardWorkPerRequest()
console.error(
  `input guard measured directly: ${guardUs} µs/request = ${round((guardUs / guarded) * 100, 2)} % of the inbound pipeline's ${guarded} µs`,
)
