import {
  countDiskStalls,
  cpuJiffies,
  cpuShares,
  type DiskStalls,
  type MachineInterval,
  percentile,
} from './support'

/**
 * The shortest wait between sends. `Bun.sleep` of less than a millisecond comes back at once, so
 * sleeping "until the next request is due" at 1,000 requests/s (one due every 1 ms, usually less
 * than 1 ms away) turned the loop into a busy wait: measured, the client then used more than one
 * of the machine's two cores and the service's latency was mostly the client's doing (p99 27-51 ms
 * against 10-13 ms with this floor). Requests due while the client sleeps are sent when it wakes;
 * their latency still counts from when they were due, so this slack (up to ~1 ms) is charged to the
 * server, never hidden.
 */
const MIN_SLEEP_MS = 1

export interface OpenLoopResult extends DiskStalls {
  sent: number
  ok: number
  failed: number
  statuses: Record<string, number>
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** CPU the load generator itself used, in cores (1 = one core busy for the whole run). */
  clientCores: number
  /** The machine's CPU time during the run: left idle, and stolen by the hypervisor (%). */
  idlePct: number
  stealPct: number
}

/**
 * The POST of one new lead to a webhook URL, as the open-loop benchmarks send it (`bun run bench`,
 * `bench:stalls`, `bench:rate-split`): a distinct e-mail per request, so every request creates a lead.
 */
export function newLeadPost(baseUrl: string, key: string, email: string): { url: string; init: RequestInit } {
  return {
    url: `${baseUrl}/api/webhook/lead/${key}`,
    init: {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        first_name: 'Bench',
        last_name: 'User',
        email,
        status: 'new',
        company: 'Acme Ltd',
      }),
    },
  }
}

/**
 * Open-loop load at a fixed rate: request i is due at start + i / rate whether or not earlier ones
 * have returned, and its latency is measured from when it was due. A slow server therefore shows
 * up as latency (no coordinated omission), unlike a closed loop that just sends less.
 */
export async function openLoop(options: {
  rate: number
  seconds: number
  makeRequest: (index: number) => { url: string; init: RequestInit }
  /** Each request's due time (performance.now() clock) and latency, for a timeline (stall-timeline.ts). */
  onLatency?: (dueMs: number, latencyMs: number, ok: boolean) => void
  /** Each 50 ms of the disks and of this process's lateness while the load runs (stall-timeline.ts). */
  onMachineInterval?: (interval: MachineInterval) => void
}): Promise<OpenLoopResult> {
  const total = Math.round(options.rate * options.seconds)
  const interval = 1000 / options.rate
  const latencies: number[] = []
  const statuses: Record<string, number> = {}
  let ok = 0
  let failed = 0
  const pending: Promise<void>[] = []
  const cpuBefore = process.cpuUsage()
  const machineBefore = cpuJiffies()
  const stopProbe = countDiskStalls(options.onMachineInterval)
  let disk: DiskStalls
  const start = performance.now()
  let next = 0
  try {
    while (next < total) {
      const now = performance.now()
      while (next < total && start + next * interval <= now) {
        const due = start + next * interval
        const { url, init } = options.makeRequest(next)
        pending.push(
          fetch(url, init).then(
            async (response) => {
              await response.arrayBuffer()
              const latency = performance.now() - due
              latencies.push(latency)
              options.onLatency?.(due, latency, response.ok)
              statuses[response.status] = (statuses[response.status] ?? 0) + 1
              if (response.ok) ok++
              else failed++
            },
            () => {
              latencies.push(performance.now() - due)
              options.onLatency?.(due, performance.now() - due, false)
              statuses.error = (statuses.error ?? 0) + 1
              failed++
            },
          ),
        )
        next++
      }
      await Bun.sleep(Math.max(MIN_SLEEP_MS, start + next * interval - performance.now()))
    }
    await Promise.all(pending)
  } finally {
    // also when a request cannot be made: no timer left behind
    disk = stopProbe()
  }
  const elapsedMs = performance.now() - start
  const cpu = process.cpuUsage(cpuBefore)
  latencies.sort((a, b) => a - b)
  return {
    sent: total,
    ok,
    failed,
    statuses,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies[latencies.length - 1] ?? Number.NaN,
    clientCores: Math.round(((cpu.user + cpu.system) / 1000 / elapsedMs) * 100) / 100,
    ...cpuShares(machineBefore, cpuJiffies()),
    ...disk,
  }
}
