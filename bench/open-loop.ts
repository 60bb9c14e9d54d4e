import { percentile } from './support'

/**
 * Open-loop load at a fixed rate: request i is due at start + i / rate whether or not earlier ones
 * have returned, and its latency is measured from when it was due. A slow server therefore shows
 * up as latency (no coordinated omission), unlike a closed loop that just sends less.
 */
export async function openLoop(options: {
  rate: number
  seconds: number
  makeRequest: (index: number) => { url: string; init: RequestInit }
}): Promise<{
  sent: number
  ok: number
  failed: number
  statuses: Record<string, number>
  p50Ms: number
  p99Ms: number
  maxMs: number
}> {
  const total = Math.round(options.rate * options.seconds)
  const interval = 1000 / options.rate
  const latencies: number[] = []
  const statuses: Record<string, number> = {}
  let ok = 0
  let failed = 0
  const pending: Promise<void>[] = []
  const start = performance.now()
  let next = 0
  while (next < total) {
    const now = performance.now()
    while (next < total && start + next * interval <= now) {
      const due = start + next * interval
      const { url, init } = options.makeRequest(next)
      pending.push(
        fetch(url, init).then(
          async (response) => {
            await response.arrayBuffer()
            latencies.push(performance.now() - due)
            statuses[response.status] = (statuses[response.status] ?? 0) + 1
            if (response.ok) ok++
            else failed++
          },
          () => {
            latencies.push(performance.now() - due)
            statuses.error = (statuses.error ?? 0) + 1
            failed++
          },
        ),
      )
      next++
    }
    await Bun.sleep(Math.max(0, start + next * interval - performance.now()))
  }
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  return {
    sent: total,
    ok,
    failed,
    statuses,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies[latencies.length - 1] ?? Number.NaN,
  }
}
