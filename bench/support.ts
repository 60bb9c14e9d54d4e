import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { newId } from '../src/lib/ids'
import { SecretBox } from '../src/lib/secrets'
import { runToEnd } from '../test/helpers/process'

/** Shared pieces of the benchmarks: databases, processes, wrk, memory. Loopback only. */
export const ROOT = join(import.meta.dir, '..')
export const ADMIN_DATABASE_URL =
  process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * `NAME=value+NAME=value` (the benches' option for a contender's extra environment) as an object.
 * A value keeps any `=` in it; an assignment without one is refused rather than run as something else.
 */
export function parseEnvAssignments(spec: string): Record<string, string> {
  return Object.fromEntries(
    spec.split('+').map((assignment) => {
      const [key, ...value] = assignment.split('=')
      if (!key || value.length === 0) throw new Error(`${spec}: ${assignment} is not NAME=value`)
      return [key, value.join('=')]
    }),
  )
}

export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`)
}

/** A fresh, empty database on the admin server; returns its URL. */
export async function freshDatabase(name: string): Promise<string> {
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.unsafe(`create database ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(ADMIN_DATABASE_URL)
  url.pathname = `/${name}`
  return url.toString()
}

export async function freePort(): Promise<number> {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = server.port!
  server.stop(true)
  return port
}

export interface RunningProcess {
  pid: number
  url: string
  /** Peak resident set size so far (VmHWM), in bytes. */
  peakRssBytes(): number
  stop(): Promise<void>
}

export async function waitForReady(url: string, path: string, timeoutMs = 30_000): Promise<number> {
  const started = performance.now()
  for (;;) {
    const response = await fetch(`${url}${path}`).catch(() => null)
    if (response?.ok) return performance.now() - started
    if (performance.now() - started > timeoutMs)
      throw new Error(`${url}${path} not ready after ${timeoutMs} ms`)
    await Bun.sleep(5)
  }
}

export function peakRssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = status.match(/VmHWM:\s+(\d+) kB/)
  return match ? Number(match[1]) * 1024 : 0
}

/** Where and how a server is started: its directory (a baseline worktree), port, replica count. */
export interface SpawnOptions {
  /** The checkout to run (default: this one); `--baseline` runs another commit's worktree. */
  cwd?: string
  /**
   * Processes sharing one port with SO_REUSEPORT (Bun.serve `reusePort`; the service reads
   * REUSE_PORT=true), the kernel balancing connections between them. Each is ready when it prints
   * `readyLine`: a readiness URL on the shared port could be answered by any of them.
   */
  replicas?: number
  readyLine?: RegExp
}

/** Starts a process (or `replicas` of them) listening on a free port and waits until they are ready. */
export async function spawnServer(
  command: string[],
  env: Record<string, string>,
  readyPath: string,
  options: SpawnOptions = {},
): Promise<RunningProcess & { readyMs: number }> {
  const port = await freePort()
  const replicas = options.replicas ?? 1
  const started = performance.now()
  const url = `http://127.0.0.1:${port}`
  const children: ReturnType<typeof Bun.spawn>[] = []
  const stop = async () => {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(
      children.map(async (child) => {
        const exited = await Promise.race([child.exited, Bun.sleep(15_000).then(() => null)])
        if (exited === null) child.kill('SIGKILL')
      }),
    )
  }
  try {
    for (let index = 0; index < replicas; index++) {
      const child = Bun.spawn(command, {
        cwd: options.cwd ?? ROOT,
        env: {
          ...process.env,
          ...env,
          PORT: String(port),
          HOST: '127.0.0.1',
          ...(replicas > 1 ? { REUSE_PORT: 'true' } : {}),
        },
        stdout: replicas > 1 ? 'pipe' : 'ignore',
        stderr: 'inherit',
      })
      children.push(child)
      if (replicas > 1) {
        if (!options.readyLine) throw new Error('replicas > 1 needs a readyLine')
        await waitForLine(child.stdout as ReadableStream<Uint8Array>, options.readyLine, 30_000)
      }
    }
    if (replicas === 1) await waitForReady(url, readyPath)
  } catch (error) {
    await stop()
    throw error
  }
  const readyMs = performance.now() - started
  return {
    pid: children[0]!.pid,
    url,
    readyMs,
    // Replicas: the sum of their peaks (what the host must hold when all peak together).
    peakRssBytes: () => children.reduce((sum, child) => sum + peakRssBytes(child.pid), 0),
    stop,
  }
}

/** Resolves when `pattern` appears in the stream; keeps draining it afterwards so the pipe never fills. */
function waitForLine(stream: ReadableStream<Uint8Array>, pattern: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms`)),
      timeoutMs,
    )
    let seen = ''
    let found = false
    void forEachText(stream, (text) => {
      if (found) return
      seen = (seen + text).slice(-8192)
      if (pattern.test(seen)) {
        found = true
        clearTimeout(timer)
        resolve()
      }
    }).then(() => {
      if (!found) {
        clearTimeout(timer)
        reject(new Error(`the process ended before printing a line matching ${pattern}`))
      }
    })
  })
}

/** Reads a child's output to its end, handing on each chunk's text as it arrives. */
export async function forEachText(
  stream: ReadableStream<Uint8Array>,
  onText: (text: string) => void,
): Promise<void> {
  const decoder = new TextDecoder()
  const reader = stream.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    onText(decoder.decode(value, { stream: true }))
  }
}

/** The complete lines of text that arrives in chunks: a line split across chunks waits for its end. */
export class LineSplitter {
  private pending = ''

  push(text: string): string[] {
    const lines = (this.pending + text).split('\n')
    this.pending = lines.pop() ?? ''
    return lines
  }
}

/**
 * The JavaScriptCore settings (`BUN_JSC_*`) of the Dockerfile's runtime stage, so the benchmarks
 * measure the service as it ships (its heap sizing changes peak RSS by a fifth).
 */
export function dockerfileJscEnv(root = ROOT): Record<string, string> {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8')
  return Object.fromEntries(
    [...dockerfile.matchAll(/^ENV\s+(BUN_JSC_\w+)=(\S+)\s*$/gm)].map((match) => [match[1]!, match[2]!]),
  )
}

/**
 * The platform-wide cap every benchmarked service gets (PLATFORM_RATE_LIMIT_PER_MIN). Its default,
 * 600,000 a minute, is one window in Redis shared by every process on it: a service measured right
 * after another (`--baseline`, `--service-variants`) found most of that minute spent and answered
 * 429 (2026-11-24: 221,786 of a baseline's requests). The cap is still checked on every request;
 * only its limit is out of reach.
 */
const BENCH_PLATFORM_RATE_LIMIT_PER_MIN = '1000000000'

/** The service as deployed (Dockerfile's JSC settings, access log on), ready when /readyz is 200. */
export function spawnService(
  env: Record<string, string>,
  options: SpawnOptions = {},
): ReturnType<typeof spawnServer> {
  return spawnServer(
    ['bun', 'src/index.ts'],
    {
      ...dockerfileJscEnv(options.cwd),
      REDIS_URL,
      LOG_LEVEL: 'info',
      PLATFORM_RATE_LIMIT_PER_MIN: BENCH_PLATFORM_RATE_LIMIT_PER_MIN,
      ...env,
    },
    '/readyz',
    { readyLine: /"msg":"ready"/, ...options },
  )
}

/** Seals the benchmarks' webhook signing secrets; their services get it as WEBHOOK_SECRETS_KEY. */
export const BENCH_SECRETS_KEY = Buffer.alloc(32, 7).toString('base64')
/** A benchmarked service that delivers webhooks: the secrets key, and its receivers on loopback allowed. */
export const BENCH_WEBHOOK_ENV = {
  WEBHOOK_SECRETS_KEY: BENCH_SECRETS_KEY,
  OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'true',
} as const

/** An outbox's events not yet delivered, as the schema of the commit that made the database keeps them. */
export interface OutboxBacklog {
  /** Deliveries still pending and lead events not yet fanned out to deliveries. */
  count(): Promise<number>
  /** Forgets the backlog (before a contender runs): nothing is sent from the last one's. */
  clear(): Promise<void>
}

/**
 * Lead events wait for the worker's fan-out since drizzle/0019: as a message marked
 * `fan_out_pending` (0019, 0020), as an id in `webhook_fan_out_queue` (0021 on); before 0019 every
 * event was a pending delivery already. A baseline's database has its own commit's shape.
 */
export async function outboxBacklog(sql: postgres.Sql): Promise<OutboxBacklog> {
  const [shape] = await sql`select
      to_regclass('webhook_fan_out_queue') is not null as queue,
      exists (select 1 from information_schema.columns
        where table_name = 'webhook_messages' and column_name = 'fan_out_pending') as flag`
  const deliveries = async () =>
    (await sql`select count(*)::int as n from webhook_deliveries where status = 'pending'`)[0]!.n as number
  const unfanned = shape!.queue
    ? async () => (await sql`select count(*)::int as n from webhook_fan_out_queue`)[0]!.n as number
    : shape!.flag
      ? async () =>
          (await sql`select count(*)::int as n from webhook_messages where fan_out_pending`)[0]!.n as number
      : async () => 0
  return {
    count: async () => (await deliveries()) + (await unfanned()),
    async clear() {
      await sql`delete from webhook_deliveries where status = 'pending'`
      if (shape!.queue) await sql`delete from webhook_fan_out_queue`
      else if (shape!.flag)
        await sql`update webhook_messages set fan_out_pending = false where fan_out_pending`
    },
  }
}

/**
 * One webhook endpoint subscribed to `lead.created` for the organization of the benchmark's sources,
 * its signing secret sealed with BENCH_SECRETS_KEY (the services get BENCH_WEBHOOK_ENV).
 */
export async function addWebhookEndpoint(sql: postgres.Sql, receiverUrl: string): Promise<void> {
  const [row] = await sql`select organization_id from webhook_sources limit 1`
  const organizationId = row!.organization_id as string
  const now = new Date()
  await sql`insert into webhook_endpoints (id, organization_id, url, event_types, secret_ciphertext, created_at, updated_at)
    values (${newId()}, ${organizationId}, ${receiverUrl}, '["lead.created"]'::jsonb,
      ${new SecretBox(BENCH_SECRETS_KEY).seal(`whsec_${Buffer.alloc(24, 1).toString('base64')}`)}, ${now}, ${now})`
}

export interface WrkResult {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  requests: number
  non2xx: number
  socketErrors: number
  /** wrk's own CPU time (user + system), ms: on 2 cores the load generator takes from the servers. */
  cpuMs: number
}

function toMs(value: string): number {
  const match = value.match(/^([\d.]+)(us|ms|s)$/)
  if (!match) return Number.NaN
  const number = Number(match[1])
  return match[2] === 'us' ? number / 1000 : match[2] === 's' ? number * 1000 : number
}

export async function runWrk(options: {
  url: string
  keysFile: string
  tag: string
  seconds: number
  connections: number
  threads: number
}): Promise<WrkResult> {
  const child = Bun.spawn(
    [
      'wrk',
      `-t${options.threads}`,
      `-c${options.connections}`,
      `-d${options.seconds}s`,
      '--latency',
      '-s',
      join(ROOT, 'bench/wrk/ingest.lua'),
      options.url,
      '--',
      options.keysFile,
      options.tag,
    ],
    { stdout: 'pipe', stderr: 'pipe' },
  )
  const output = await new Response(child.stdout).text()
  await child.exited
  const usage = child.resourceUsage()
  const cpuMs = usage ? Number(usage.cpuTime.user + usage.cpuTime.system) / 1000 : Number.NaN
  const rps = output.match(/Requests\/sec:\s+([\d.]+)/)
  if (!rps) throw new Error(`unexpected wrk output:\n${output}\n${await new Response(child.stderr).text()}`)
  const percentile = (label: string) =>
    toMs(output.match(new RegExp(`\\s${label}%\\s+([\\d.]+\\w+)`))?.[1] ?? '')
  const socketErrors = output.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
  return {
    requestsPerSecond: Number(rps[1]),
    p50Ms: percentile('50'),
    p99Ms: percentile('99'),
    requests: Number(output.match(/(\d+) requests in/)?.[1] ?? 0),
    non2xx: Number(output.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0),
    socketErrors: socketErrors ? socketErrors.slice(1).reduce((sum, value) => sum + Number(value), 0) : 0,
    cpuMs,
  }
}

/** Runs the project CLI and returns its stdout; throws with stderr on a non-zero exit. */
/** The project's CLI; `cwd` runs another checkout's (a benchmark baseline's) instead of this one's. */
export async function cli(args: string[], env: Record<string, string>, cwd = ROOT): Promise<string> {
  const { code, stdout, stderr } = await runToEnd(['bun', 'run', 'src/cli/index.ts', ...args], {
    cwd,
    env: { ...process.env, ...env, LOG_LEVEL: 'warn' },
  })
  if (code !== 0) throw new Error(`cli ${args.join(' ')} failed (${code}):\n${stderr}`)
  return stdout
}

/** The item whose value is the median (the upper one of an even count); the benchmarks' single figure of several runs. */
export function medianBy<T>(items: readonly T[], value: (item: T) => number): T {
  if (items.length === 0) throw new Error('no runs to take a median of')
  return [...items].sort((a, b) => value(a) - value(b))[Math.floor(items.length / 2)]!
}

export function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!
}

export const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits
export const megabytes = (bytes: number) => round(bytes / 1024 / 1024, 1)

/**
 * A run's e-mail prefix, dated in base 36. A decimal `Date.now()` put 13 digits in a row into every
 * e-mail, which the inbound card-number redaction (lib/card-data.ts) removes when they pass the
 * Luhn check, about one run in ten: that run's leads were then answered 200 as `missing_contact`,
 * cheaper than a lead, and the run's throughput was flattered.
 */
export function runTag(base: string, run: string): string {
  return `${base}-${run}-t${Date.now().toString(36)}`
}

/**
 * `git worktree add` of `rev` in a temporary directory with its own dependencies (bun install
 * --frozen-lockfile): that commit's service runs as one more contender, on a database of its own
 * that its own CLI provisions (so its own migrations). On the shared database an older commit would
 * run the newest SQL functions: its migrator skips versions it does not know, and commits before
 * the repeatable migrations (drizzle/functions) do not re-apply their definitions at start. Every
 * service variant has a database of its own as well, so each grows by its own leads only.
 */
export async function checkoutBaseline(
  rev: string,
): Promise<{ dir: string; label: string; remove(): Promise<void> }> {
  const git = async (args: string[], cwd = ROOT) => {
    const result = await runToEnd(['git', ...args], { cwd, env: process.env })
    if (result.code !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`)
    return result.stdout.trim()
  }
  const label = await git(['rev-parse', '--short', rev])
  const dir = mkdtempSync(join(tmpdir(), `lead-capture-baseline-${label}-`))
  await git(['worktree', 'add', '--detach', dir, rev])
  const remove = () => git(['worktree', 'remove', '--force', dir]).then(() => {})
  log(`baseline ${label}: bun install --frozen-lockfile in ${dir}`)
  const install = await runToEnd(['bun', 'install', '--frozen-lockfile'], { cwd: dir, env: process.env })
  if (install.code !== 0) {
    await remove()
    throw new Error(`baseline ${label}: bun install failed:\n${install.stderr}`)
  }
  return { dir, label, remove }
}

/** The machine's CPU time since boot by kind, in jiffies (the `cpu` line of /proc/stat). */
export interface CpuJiffies {
  idle: number
  steal: number
  all: number
}

/**
 * The `cpu` line of a /proc/stat text: user nice system idle iowait irq softirq steal (guest time is
 * inside user and nice, so it is not added again). Idle counts iowait; a kernel without the steal
 * column (before 2.6.11) reads as none stolen.
 */
export function parseCpuJiffies(procStat: string): CpuJiffies {
  const line = procStat.split('\n').find((entry) => /^cpu\s/.test(entry))
  if (!line) throw new Error('/proc/stat has no cpu line')
  const fields = line.trim().split(/\s+/).slice(1, 9).map(Number)
  if (fields.length < 4 || fields.some((value) => !Number.isFinite(value)))
    throw new Error(`unreadable /proc/stat cpu line: ${line}`)
  return {
    idle: fields[3]! + (fields[4] ?? 0),
    steal: fields[7] ?? 0,
    all: fields.reduce((sum, value) => sum + value, 0),
  }
}

export function cpuJiffies(): CpuJiffies {
  return parseCpuJiffies(readFileSync('/proc/stat', 'utf8'))
}

/**
 * Shares of the machine's CPU time between two readings, in per cent: idle (with iowait) and stolen
 * by the hypervisor. Both are printed beside every figure because a virtual machine's neighbours take
 * CPU unannounced: on 2026-11-27 one machine of the kind ran every contender at a third of the rate
 * of the one before, with 3-25% stolen in some minutes and 0-2.5% in others (docs/benchmarks.md,
 * A17): a rate alone does not say which kind of minute it was measured in.
 */
export function cpuShares(before: CpuJiffies, after: CpuJiffies): { idlePct: number; stealPct: number } {
  const all = after.all - before.all
  if (all <= 0) return { idlePct: 0, stealPct: 0 }
  return {
    idlePct: round((100 * (after.idle - before.idle)) / all, 1),
    stealPct: round((100 * (after.steal - before.steal)) / all, 1),
  }
}

/** The processor's model name (/proc/cpuinfo), or null where it says none. */
export function cpuModel(): string | null {
  const line = readFileSync('/proc/cpuinfo', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('model name'))
  return line?.split(':')[1]?.trim() ?? null
}

/** Writes completed by the machine's whole disks since boot (/proc/diskstats), summed. */
export interface DiskWrites {
  writes: number
  sectors: number
  /** milliseconds the writes spent in the device's queue and service, summed over writes */
  writeMs: number
  /** flush requests (fsync, fdatasync reach the device as these where it has a volatile cache) */
  flushes: number
  flushMs: number
}

// Whole disks only: a partition's line repeats its disk's I/O. Loop, RAM and device-mapper lines are
// not disks of their own (a dm device's writes are its disks' writes).
const WHOLE_DISK = /^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme\d+n\d+|mmcblk\d+)$/

/**
 * A /proc/diskstats text, summed over whole disks: after major, minor and name come reads (4
 * fields), writes completed, merged, sectors and ms, in flight, ms doing I/O, weighted ms, discards
 * (4, since Linux 4.18) and flushes completed and ms (since 5.5); a kernel without the flush fields
 * reads as none.
 */
export function parseDiskWrites(procDiskstats: string): DiskWrites {
  const total: DiskWrites = { writes: 0, sectors: 0, writeMs: 0, flushes: 0, flushMs: 0 }
  let disks = 0
  for (const line of procDiskstats.split('\n')) {
    const fields = line.trim().split(/\s+/)
    if (fields.length < 14 || !WHOLE_DISK.test(fields[2]!)) continue
    const value = (index: number) => {
      const number = Number(fields[index] ?? 0)
      if (!Number.isFinite(number)) throw new Error(`unreadable /proc/diskstats line: ${line}`)
      return number
    }
    disks++
    total.writes += value(7)
    total.sectors += value(9)
    total.writeMs += value(10)
    total.flushes += value(18)
    total.flushMs += value(19)
  }
  if (disks === 0) throw new Error('/proc/diskstats lists no whole disk')
  return total
}

export function diskWrites(): DiskWrites {
  return parseDiskWrites(readFileSync('/proc/diskstats', 'utf8'))
}

/**
 * What the disks did between two readings: MB written, the mean time of a write and of a flush, ms
 * (0 where there was none).
 */
export function diskInterval(
  before: DiskWrites,
  after: DiskWrites,
): { mbWritten: number; writeMs: number; flushMs: number } {
  const mean = (ms: number, count: number) => (count > 0 ? round(ms / count, 2) : 0)
  return {
    mbWritten: round(((after.sectors - before.sectors) * 512) / 1024 / 1024, 1),
    writeMs: mean(after.writeMs - before.writeMs, after.writes - before.writes),
    flushMs: mean(after.flushMs - before.flushMs, after.flushes - before.flushes),
  }
}

/** One probe interval: what the disks did in it, and how late the probe came (its own process held up). */
export interface MachineInterval {
  /** epoch ms when the interval began */
  at: number
  durationMs: number
  /** how much later than due this sample came: the probing process's own event loop was held up */
  lateMs: number
  mbWritten: number
  writeMs: number
  flushMs: number
}

/**
 * The mean time of a write or a cache flush over one probe interval from which the disk counts as
 * slow: the benchmark machine's idle disk answers an 8 kB write with its flush in ~0.1 ms
 * (pg_test_fsync), and under the service at 1,000 leads/s most 50 ms intervals averaged 0.04-0.1
 * ms, while the intervals under its 100 ms requests averaged 2-210 ms (docs/benchmarks.md, "The
 * open loop's tail on a fast machine"). A commit waits for its WAL to reach the disk, so a slow
 * disk is a slow lead for every contender alike.
 */
export const DISK_SLOW_MS = 1
export const PROBE_MS = 50

/** Samples the disks every `everyMs` until the returned function is called (it takes the last sample). */
export function probeMachine(
  onInterval: (interval: MachineInterval) => void,
  everyMs = PROBE_MS,
): () => void {
  const sample = () => ({ at: performance.timeOrigin + performance.now(), disk: diskWrites() })
  let last = sample()
  const take = () => {
    const now = sample()
    const durationMs = now.at - last.at
    onInterval({
      at: last.at,
      durationMs: round(durationMs, 1),
      lateMs: round(Math.max(0, durationMs - everyMs), 1),
      ...diskInterval(last.disk, now.disk),
    })
    last = now
  }
  const timer = setInterval(take, everyMs)
  return () => {
    clearInterval(timer)
    take()
  }
}

/** Beside every figure, like idle and steal: the probe intervals whose disk was slow, and the worst. */
export interface DiskStalls {
  diskSlowIntervals: number
  /** the slowest mean write or flush of an interval, ms */
  diskWorstMs: number
}

export function diskStalls(intervals: readonly MachineInterval[]): DiskStalls {
  let diskSlowIntervals = 0
  let diskWorstMs = 0
  for (const interval of intervals) {
    const slowest = Math.max(interval.writeMs, interval.flushMs)
    if (slowest >= DISK_SLOW_MS) diskSlowIntervals++
    diskWorstMs = Math.max(diskWorstMs, slowest)
  }
  return { diskSlowIntervals, diskWorstMs: round(diskWorstMs, 2) }
}

/**
 * Counts disk stalls from now until the returned function is called; `onInterval` sees each
 * interval as well (bench:stalls' timeline).
 */
export function countDiskStalls(onInterval?: (interval: MachineInterval) => void): () => DiskStalls {
  const intervals: MachineInterval[] = []
  const stop = probeMachine((interval) => {
    intervals.push(interval)
    onInterval?.(interval)
  })
  return () => {
    stop()
    return diskStalls(intervals)
  }
}

/** How a line prints them: `disk slow 3×50 ms (worst 57.02 ms)`. */
export function describeDiskStalls({ diskSlowIntervals, diskWorstMs }: DiskStalls): string {
  return `disk slow ${diskSlowIntervals}×${PROBE_MS} ms (worst ${diskWorstMs} ms)`
}

/**
 * The PostgreSQL server's own write counters: every database on it, like the disk probe every
 * process on the machine, so a reading says what all its work wrote in an interval (on the
 * benchmark's own server, the contender's). The WAL's bytes are its insert position, exact; the
 * other three are cumulative statistics (`pg_stat_wal`, `pg_stat_bgwriter`), which a busy backend
 * reports at most once a second: over an 8 s level they can miss up to about a second's worth.
 */
export interface DatabaseWrites {
  walBytes: number
  walRecords: number
  /** full-page images: a page's first change after a checkpoint writes all 8 kB of it to the WAL */
  walFullPages: number
  /**
   * buffers backends wrote themselves (`buffers_backend`): every new page of a growing table, and,
   * once the shared buffers are full of dirty pages, each one a backend had to evict to make room
   */
  buffersByBackends: number
}

/** Per request of an interval: what a line prints, and what summary and results files keep. */
export interface DatabaseWritesPerRequest {
  walBytesPerRequest: number
  walRecordsPerRequest: number
  walFullPagesPer1000: number
  backendWritesPer1000: number
}

export function databaseWritesPerRequest(
  before: DatabaseWrites,
  after: DatabaseWrites,
  requests: number,
): DatabaseWritesPerRequest {
  const per = (delta: number, scale: number, digits: number) =>
    requests > 0 ? round((delta * scale) / requests, digits) : 0
  return {
    walBytesPerRequest: per(after.walBytes - before.walBytes, 1, 0),
    walRecordsPerRequest: per(after.walRecords - before.walRecords, 1, 1),
    walFullPagesPer1000: per(after.walFullPages - before.walFullPages, 1000, 1),
    backendWritesPer1000: per(after.buffersByBackends - before.buffersByBackends, 1000, 1),
  }
}

/**
 * Reads the counters on `sql` (any database of the server). Resolves to null where the server has no
 * `pg_stat_wal` (before PostgreSQL 14): the figures are then left out, never made up.
 */
export async function databaseWrites(sql: postgres.Sql): Promise<DatabaseWrites | null> {
  try {
    const [row] = await sql<Array<Record<keyof DatabaseWrites, string>>>`
      select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text as "walBytes",
        w.wal_records::text as "walRecords",
        w.wal_fpi::text as "walFullPages", b.buffers_backend::text as "buffersByBackends"
      from pg_stat_wal w, pg_stat_bgwriter b`
    if (!row) return null
    return {
      walBytes: Number(row.walBytes),
      walRecords: Number(row.walRecords),
      walFullPages: Number(row.walFullPages),
      buffersByBackends: Number(row.buffersByBackends),
    }
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return null // undefined_table: no pg_stat_wal
    throw error
  }
}

/** How a line prints them: `WAL 1,650 B / 11.6 records a request, full pages 0.4‰, written by backends 12.3‰`. */
export function describeDatabaseWrites(writes: DatabaseWritesPerRequest | undefined): string {
  if (!writes) return 'database writes not read'
  return `WAL ${writes.walBytesPerRequest.toLocaleString('en-US')} B / ${writes.walRecordsPerRequest} records a request, full pages ${writes.walFullPagesPer1000}‰, written by backends ${writes.backendWritesPer1000}‰`
}

/** The span of an open loop's measured requests: from the first one due to the last one answered. */
export function measuredSpan(samples: ReadonlyArray<{ due: number; latency: number }>): {
  from: number
  to: number
} {
  let from = Number.POSITIVE_INFINITY
  let to = Number.NEGATIVE_INFINITY
  for (const sample of samples) {
    from = Math.min(from, sample.due)
    to = Math.max(to, sample.due + sample.latency)
  }
  return { from, to }
}

/** The events that began inside a span: a run's counts leave out its start-up's and warm-up's. */
export function beganWithin<T extends { at: number }>(
  events: readonly T[],
  span: { from: number; to: number },
): T[] {
  return events.filter((event) => event.at >= span.from && event.at <= span.to)
}
