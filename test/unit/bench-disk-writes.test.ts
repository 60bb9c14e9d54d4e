import { describe, expect, test } from 'bun:test'
import { openLoop } from '../../bench/open-loop'
import {
  DISK_SLOW_MS,
  type DiskWrites,
  describeDiskStalls,
  diskInterval,
  diskStalls,
  diskWrites,
  type MachineInterval,
  PROBE_MS,
  parseDiskWrites,
  probeMachine,
} from '../../bench/support'

/**
 * `bench:stalls` marks the intervals whose disk writes were slow (bench/stall-timeline.ts), from
 * /proc/diskstats: major minor name, reads (4 fields), writes completed, merged, sectors, ms, in
 * flight, ms doing I/O, weighted ms, discards (4), flushes completed and ms. A partition's line
 * repeats its disk's I/O, so only whole disks are summed.
 */
const line = (name: string, writes: number, sectors: number, writeMs: number, flushes?: [number, number]) =>
  [8, 0, name, 10, 0, 80, 5, writes, 2, sectors, writeMs, 0, 40, 60, 0, 0, 0, 0, ...(flushes ?? [])].join(' ')

describe('parseDiskWrites', () => {
  test.each<[string, string, DiskWrites]>([
    [
      'a virtio disk and its partition: the partition is not counted again',
      `${line('vda', 100, 2048, 50, [7, 3])}\n${line('vda1', 100, 2048, 50, [7, 3])}\n`,
      { writes: 100, sectors: 2048, writeMs: 50, flushes: 7, flushMs: 3 },
    ],
    [
      'two whole disks (SCSI and NVMe) summed; loop and device-mapper lines left out',
      `${line('sda', 10, 100, 5, [1, 1])}\n${line('nvme0n1', 20, 200, 6, [2, 2])}\n${line('nvme0n1p1', 20, 200, 6, [2, 2])}\n${line('loop0', 99, 999, 99, [9, 9])}\n${line('dm-0', 30, 300, 7, [3, 3])}\n`,
      { writes: 30, sectors: 300, writeMs: 11, flushes: 3, flushMs: 3 },
    ],
    [
      'a kernel before 5.5 has no flush fields: none flushed',
      `${line('sdb', 4, 64, 2)}\n`,
      { writes: 4, sectors: 64, writeMs: 2, flushes: 0, flushMs: 0 },
    ],
  ])('%s', (_name, text, expected) => {
    expect(parseDiskWrites(text)).toEqual(expected)
  })

  test('no whole disk, or an unreadable field, is an error, never zeros', () => {
    expect(() => parseDiskWrites(`${line('loop0', 1, 1, 1)}\n`)).toThrow(
      '/proc/diskstats lists no whole disk',
    )
    // the writes-completed field unreadable
    expect(() => parseDiskWrites('8 0 vda 10 0 80 5 x 2 16 1 0 40 60 0 0 0 0 1 1\n')).toThrow(
      'unreadable /proc/diskstats line',
    )
  })

  test('this machine has a whole disk to read', () => {
    const reading = diskWrites()
    expect(reading.writes).toBeGreaterThanOrEqual(0)
    expect(Number.isFinite(reading.writeMs)).toBe(true)
  })
})

describe('diskInterval', () => {
  const at = (writes: number, sectors: number, writeMs: number, flushes = 0, flushMs = 0): DiskWrites => ({
    writes,
    sectors,
    writeMs,
    flushes,
    flushMs,
  })

  test('MB written and the mean time of a write and of a flush between two readings', () => {
    // 44 MB in 100 writes taking 569 ms in all: the burst under the 33 ms request of 2026-11-27.
    expect(diskInterval(at(1000, 0, 100, 40, 4), at(1100, 90112, 669, 50, 9))).toEqual({
      mbWritten: 44,
      writeMs: 5.69,
      flushMs: 0.5,
    })
  })

  test('no write or flush in the interval: nothing written, no mean', () => {
    expect(diskInterval(at(5, 80, 3), at(5, 80, 3))).toEqual({ mbWritten: 0, writeMs: 0, flushMs: 0 })
  })
})

describe('diskStalls', () => {
  const interval = (writeMs: number, flushMs: number): MachineInterval => ({
    at: 0,
    durationMs: PROBE_MS,
    lateMs: 0,
    mbWritten: 0.1,
    writeMs,
    flushMs,
  })

  test('an interval counts once when its writes or its flushes were slow on average; the worst either way', () => {
    const stalls = diskStalls([
      interval(0.05, 0.04),
      interval(DISK_SLOW_MS, 0),
      interval(0.1, 57.02),
      interval(3.2, 2.1),
      interval(0.99, 0.99),
    ])
    expect(stalls).toEqual({ diskSlowIntervals: 3, diskWorstMs: 57.02 })
    expect(describeDiskStalls(stalls)).toBe(`disk slow 3×${PROBE_MS} ms (worst 57.02 ms)`)
  })

  test('no interval: none slow', () => {
    expect(diskStalls([])).toEqual({ diskSlowIntervals: 0, diskWorstMs: 0 })
  })
})

describe('probeMachine', () => {
  test('samples this machine every interval until stopped, and once more when stopped', async () => {
    const intervals: MachineInterval[] = []
    const stop = probeMachine((sample) => intervals.push(sample), 10)
    await Bun.sleep(100)
    stop()
    const taken = intervals.length
    await Bun.sleep(30)
    expect(taken).toBeGreaterThanOrEqual(2)
    expect(intervals.length).toBe(taken)
    for (const sample of intervals) {
      expect(sample.durationMs).toBeGreaterThanOrEqual(0)
      expect(sample.lateMs).toBeGreaterThanOrEqual(0)
      expect(sample.mbWritten).toBeGreaterThanOrEqual(0)
      expect(sample.writeMs).toBeGreaterThanOrEqual(0)
    }
    // consecutive: each interval begins where the one before ended
    for (let index = 1; index < intervals.length; index++)
      expect(intervals[index]!.at).toBeCloseTo(intervals[index - 1]!.at + intervals[index - 1]!.durationMs, 0)
  })
})

describe('openLoop', () => {
  test('reports the disk stalls of its run and hands each probe interval on; a request that cannot be made stops the probe', async () => {
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('ok') })
    try {
      const intervals: MachineInterval[] = []
      const result = await openLoop({
        rate: 200,
        seconds: 0.3,
        makeRequest: () => ({ url: `http://127.0.0.1:${server.port}/`, init: {} }),
        onMachineInterval: (interval) => intervals.push(interval),
      })
      expect(result.ok).toBe(60)
      expect(result.failed).toBe(0)
      expect(result.statuses).toEqual({ 200: 60 })
      // every 50 ms of the 0.3 s (fewer when the machine is busy), and the last part when it stopped
      expect(intervals.length).toBeGreaterThanOrEqual(2)
      expect(result).toMatchObject(diskStalls(intervals))
      const handedOn = intervals.length
      await Bun.sleep(120)
      expect(intervals.length).toBe(handedOn)

      const failing: MachineInterval[] = []
      const broken = openLoop({
        rate: 100,
        seconds: 0.2,
        makeRequest: () => {
          throw new Error('no request')
        },
        onMachineInterval: (interval) => failing.push(interval),
      })
      await expect(broken).rejects.toThrow('no request')
      const afterFailure = failing.length
      await Bun.sleep(120)
      expect(failing.length).toBe(afterFailure)
    } finally {
      server.stop(true)
    }
  })
})
