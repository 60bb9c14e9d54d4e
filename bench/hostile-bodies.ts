/**
 * `bun run bench:hostile-bodies`: what one inbound request costs the event loop for each of a set of
 * hostile body shapes near the 100 KB limit (many keys, card-like names, long digit runs, escapes,
 * long keys, long words, `@` everywhere), against a plain lead. Each request's CPU time runs on the one
 * event loop every other request of the replica waits behind, so a shape that costs seconds (a
 * quadratic pattern: a 60 KB field name of capitals once took 2.6 s, docs/security.md "Input
 * limits") is an outage any holder of a webhook URL can cause. A new pattern or walk over the body
 * is checked here; test/unit/regex-safety.test.ts checks the patterns themselves.
 *
 * Method, fixed before the first run: the inbound route through `app.handle` in this process, on the
 * embedded PGlite (no network in the timing), a source per shape; WARMUP requests, then REQUESTS
 * requests, each with a fresh e-mail; per shape the status and the median and largest process CPU
 * time per request (`process.cpuUsage`, user + system: the work, not the waits). Prints a table and
 * writes bench/results/hostile-bodies.json.
 *
 * BENCH_HOSTILE_REQUESTS (default 20; at most 57, so that a shape's requests stay under its key's limit).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createOrganization, createSource } from '../test/helpers/factories'
import { makeTestApp, request } from '../test/helpers/test-app'
import { percentile, ROOT, round } from './support'

const REQUESTS = Math.min(57, Number(process.env.BENCH_HOSTILE_REQUESTS ?? 20))
const WARMUP = 3

let counter = 0
const email = () => `hostile-${counter++}@example.com`
const keys = (count: number, name: (index: number) => string, value: unknown) =>
  Object.fromEntries(Array.from({ length: count }, (_, index) => [name(index), value]))

/** Each shape's body, a fresh one per request (a new e-mail, so every request writes a lead). */
const SHAPES: Array<[name: string, body: () => string]> = [
  ['a plain lead', () => JSON.stringify({ email: email(), first_name: 'Ada', note: 'hello' })],
  ['9,000 keys', () => JSON.stringify({ email: email(), ...keys(9000, (i) => `f${i}`, 1) })],
  ['6,000 card-like keys', () => JSON.stringify({ email: email(), ...keys(6000, (i) => `card_x${i}`, 'v') })],
  [
    'a 95 KB key of capitals after "card"',
    () => JSON.stringify({ email: email(), [`card${'A'.repeat(95_000)}`]: 1 }),
  ],
  ['a 95 KB key', () => JSON.stringify({ email: email(), ['x'.repeat(95_000)]: 1 })],
  [
    '4,700 card numbers in groups, one string',
    () => JSON.stringify({ email: email(), note: ' 4111 1111 1111 1111'.repeat(4700) }),
  ],
  [
    '6,000 glued card numbers, one word',
    () => JSON.stringify({ email: email(), note: '/4111111111111111'.repeat(5500) }),
  ],
  [
    '10,500 escaped token prefixes',
    () => JSON.stringify({ email: email(), note: '%66l_pat_'.repeat(10_500) }),
  ],
  ['15,000 \\u escapes', () => `{"email":"${email()}","note":"${'\\u0034'.repeat(15_000)}"}`],
  ['a 95 KB e-mail', () => JSON.stringify({ email: `${'a'.repeat(95_000)}@example.com` })],
  ['a 95 KB word of letters', () => JSON.stringify({ email: email(), note: 'x'.repeat(95_000) })],
  ['95 KB of @', () => JSON.stringify({ email: email(), note: '@'.repeat(95_000) })],
  ['12,000 short addresses', () => JSON.stringify({ email: email(), note: 'a.b@c.d '.repeat(12_000) })],
  [
    '12,000 digit addresses',
    () => JSON.stringify({ email: email(), note: ' 4111111111111111@a.bc'.repeat(4_300) }),
  ],
  [
    '150 values 30 levels deep',
    () =>
      JSON.stringify({
        email: email(),
        d: Array.from({ length: 150 }, () => JSON.parse(`${'['.repeat(29)}"x"${']'.repeat(29)}`)),
      }),
  ],
]

const { app, ctx } = await makeTestApp()
const organization = await createOrganization(ctx)

/** One request's process CPU time in ms, and its status. */
async function post(apiKey: string, body: string): Promise<{ cpuMs: number; status: number }> {
  const before = process.cpuUsage()
  const response = await app.handle(
    request('POST', `/api/webhook/lead/${apiKey}`, { body, headers: { 'content-type': 'application/json' } }),
  )
  await response.arrayBuffer()
  const used = process.cpuUsage(before)
  return { cpuMs: (used.user + used.system) / 1000, status: response.status }
}

const rows: Array<{ shape: string; bytes: number; status: number; medianMs: number; maxMs: number }> = []
console.log('shape                                       bytes  status  CPU ms a request: median  max')
for (const [shape, body] of SHAPES) {
  // A source per shape: the per-key limit (60 a minute) would answer the later shapes 429.
  const { apiKey } = await createSource(ctx, organization.id)
  for (let index = 0; index < WARMUP; index++) await post(apiKey, body())
  const times: number[] = []
  let status = 0
  let bytes = 0
  for (let index = 0; index < REQUESTS; index++) {
    const text = body()
    bytes = text.length
    const result = await post(apiKey, text)
    times.push(result.cpuMs)
    status = result.status
  }
  times.sort((a, b) => a - b)
  const row = {
    shape,
    bytes,
    status,
    medianMs: round(percentile(times, 0.5), 1),
    maxMs: round(percentile(times, 1), 1),
  }
  rows.push(row)
  console.log(
    `${shape.padEnd(42)} ${String(bytes).padStart(7)}  ${String(status).padStart(6)}  ${String(row.medianMs).padStart(22)}  ${String(row.maxMs).padStart(5)}`,
  )
}
mkdirSync(join(ROOT, 'bench/results'), { recursive: true })
writeFileSync(
  join(ROOT, 'bench/results/hostile-bodies.json'),
  `${JSON.stringify({ date: new Date().toISOString(), requests: REQUESTS, rows }, null, 2)}\n`,
)
process.exit(0)
