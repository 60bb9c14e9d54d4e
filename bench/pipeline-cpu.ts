import { readFileSync } from 'node:fs'
import { createApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { FakeClock } from '../src/lib/clock'
import { MemoryRateLimiter } from '../src/lib/rate-limit'
import { inboundService } from '../src/modules/inbound/service'
import { answerWithoutWork } from './floor-server'
import { prepareBenchDatabase } from './ingest'
import { freePort, log, medianBy, round, runWrk } from './support'

/**
 * `bun run bench:pipeline`: CPU of the Bun process per inbound request with the I/O clients taken
 * out, against a bare `Bun.serve` that parses the JSON and answers. The service runs in this process
 * with the in-process limiter and the lead write replaced by an immediate answer (the source lookups
 * still go to PostgreSQL once per key, then come from the cache), so what is measured is the
 * framework, the hooks, validation, normalisation and the access log. wrk drives both; CPU is read
 * from /proc/self/stat around the measured run. A diagnostic for the ingest ratio, not a target.
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
const repository = inboundService(ctx).repository
repository.ingest = async () => ({ leadId: Bun.randomUUIDv7(), outcome: 'created' })
const service = createApp(ctx).listen({ port: servicePort, hostname: '127.0.0.1' })

const rows: Array<{ round: number; bare: number; service: number; serviceRps: number }> = []
try {
  for (let index = 1; index <= ROUNDS; index++) {
    const baseline = await cpuPerRequest(
      `http://127.0.0.1:${barePort}`,
      keysFile,
      `bare-${index}-${Date.now()}`,
    )
    clock.advance(61_000)
    const pipeline = await cpuPerRequest(
      `http://127.0.0.1:${servicePort}`,
      keysFile,
      `pipe-${index}-${Date.now()}`,
    )
    rows.push({ round: index, bare: baseline.cpuUs, service: pipeline.cpuUs, serviceRps: pipeline.rps })
    log(
      `round ${index}: bare Bun.serve ${baseline.cpuUs} µs/request, inbound pipeline ${pipeline.cpuUs} µs/request`,
    )
  }
} finally {
  bare.stop(true)
  await service.stop()
  await ctx.close()
}
const median = (values: number[]) => medianBy(values, (value) => value)
console.error(
  `Bun CPU per request (median of ${ROUNDS}): bare ${median(rows.map((row) => row.bare))} µs, inbound pipeline without I/O ${median(rows.map((row) => row.service))} µs`,
)
