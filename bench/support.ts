import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { runToEnd } from '../test/helpers/process'

/** Shared pieces of the benchmarks: databases, processes, wrk, memory. Loopback only. */
export const ROOT = join(import.meta.dir, '..')
export const ADMIN_DATABASE_URL =
  process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

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

/** Starts a process listening on a free port and waits until `readyPath` answers 2xx. */
export async function spawnServer(
  command: string[],
  env: Record<string, string>,
  readyPath: string,
): Promise<RunningProcess & { readyMs: number }> {
  const port = await freePort()
  const started = performance.now()
  const child = Bun.spawn(command, {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  await waitForReady(url, readyPath)
  const readyMs = performance.now() - started
  return {
    pid: child.pid,
    url,
    readyMs,
    peakRssBytes: () => peakRssBytes(child.pid),
    async stop() {
      child.kill('SIGTERM')
      const exited = await Promise.race([child.exited, Bun.sleep(15_000).then(() => null)])
      if (exited === null) child.kill('SIGKILL')
    },
  }
}

/**
 * The JavaScriptCore settings (`BUN_JSC_*`) of the Dockerfile's runtime stage, so the benchmarks
 * measure the service as it ships (its heap sizing changes peak RSS by a fifth).
 */
export function dockerfileJscEnv(): Record<string, string> {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  return Object.fromEntries(
    [...dockerfile.matchAll(/^ENV\s+(BUN_JSC_\w+)=(\S+)\s*$/gm)].map((match) => [match[1]!, match[2]!]),
  )
}

/** The service as deployed (Dockerfile's JSC settings, access log on), ready when /readyz is 200. */
export function spawnService(env: Record<string, string>): ReturnType<typeof spawnServer> {
  return spawnServer(
    ['bun', 'src/index.ts'],
    { ...dockerfileJscEnv(), REDIS_URL, LOG_LEVEL: 'info', ...env },
    '/readyz',
  )
}

export interface WrkResult {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  requests: number
  non2xx: number
  socketErrors: number
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
  }
}

/** Runs the project CLI and returns its stdout; throws with stderr on a non-zero exit. */
export async function cli(args: string[], env: Record<string, string>): Promise<string> {
  const { code, stdout, stderr } = await runToEnd(['bun', 'run', 'src/cli/index.ts', ...args], {
    cwd: ROOT,
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
