import { heapStats } from 'bun:jsc'
import { appendFileSync } from 'node:fs'

/**
 * Where a running replica's memory is (docs/benchmarks.md, "Memory: where a replica's RSS goes").
 * Loaded before the service, it changes nothing in it:
 *
 *   MEMORY_PROBE_FILE=/tmp/probe.log bun --preload ./bench/memory-probe.ts src/index.ts
 *
 * Every MEMORY_PROBE_INTERVAL_MS (500) one line: RSS, the JavaScript heap in use and reserved, and
 * the memory its objects hold outside it (strings, buffers). On SIGUSR2: two full collections, then
 * the live heap and its 40 most numerous object types (drive the load, then `kill -USR2 <pid>`;
 * counting the types walks the heap, so not while measuring throughput).
 */
const file = process.env.MEMORY_PROBE_FILE ?? 'memory-probe.log'
const intervalMs = Number(process.env.MEMORY_PROBE_INTERVAL_MS ?? 500)
const startedAt = performance.now()
const mb = (bytes: number) => (bytes / 1048576).toFixed(1)

setInterval(() => {
  // process.memoryUsage() only: heapStats() walks the whole heap to count its objects, which under
  // load cost the service most of its throughput when run this often.
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage()
  const seconds = ((performance.now() - startedAt) / 1000).toFixed(1)
  appendFileSync(
    file,
    `${seconds}s rss ${mb(rss)} heap ${mb(heapUsed)} of ${mb(heapTotal)} external ${mb(external)}\n`,
  )
}, intervalMs).unref()

process.on('SIGUSR2', () => {
  const before = heapStats().heapSize
  Bun.gc(true)
  Bun.gc(true)
  const heap = heapStats()
  const types = Object.entries(heap.objectTypeCounts)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 40)
    .map(([type, count]) => `${type}:${count}`)
  appendFileSync(
    file,
    `full collection: heap ${mb(before)} -> ${mb(heap.heapSize)} MB live, capacity ${mb(heap.heapCapacity)}, external ${mb(heap.extraMemorySize)}, rss ${mb(process.memoryUsage().rss)}\n  ${types.join(' ')}\n`,
  )
})
