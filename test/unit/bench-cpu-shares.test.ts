import { describe, expect, test } from 'bun:test'
import { type CpuJiffies, cpuJiffies, cpuShares, parseCpuJiffies } from '../../bench/support'

/**
 * The benches print the machine's idle and stolen CPU beside every figure (bench/support.ts), read
 * from the `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal guest guest_nice.
 * Guest time is already inside user and nice, so a reader that summed all ten columns would count it
 * twice; a kernel's line may also stop before steal.
 */
describe('parseCpuJiffies', () => {
  test.each<[string, string, CpuJiffies]>([
    [
      'a modern kernel: ten columns, guest left out of the total',
      'cpu  100 5 50 800 20 3 2 40 7 1\ncpu0 50 2 25 400 10 1 1 20 3 0\nintr 1 2 3\n',
      { idle: 820, steal: 40, all: 1020 },
    ],
    [
      'no steal column (before Linux 2.6.11): none stolen',
      'cpu 100 5 50 800 20 3 2\n',
      { idle: 820, steal: 0, all: 980 },
    ],
    ['no iowait column: idle alone', 'cpu 100 5 50 800\n', { idle: 800, steal: 0, all: 955 }],
    [
      'the per-core lines before it are not the machine',
      'cpu0 1 1 1 1 1 1 1 1\ncpu 10 0 10 70 5 0 0 5 0 0\n',
      { idle: 75, steal: 5, all: 100 },
    ],
  ])('%s', (_name, text, expected) => {
    expect(parseCpuJiffies(text)).toEqual(expected)
  })

  test('a text without a cpu line, or with an unreadable one, is an error, never zeros', () => {
    expect(() => parseCpuJiffies('intr 1 2 3\n')).toThrow('/proc/stat has no cpu line')
    expect(() => parseCpuJiffies('cpu 10 x 10 70\n')).toThrow('unreadable /proc/stat cpu line')
    expect(() => parseCpuJiffies('cpu 10 10\n')).toThrow('unreadable /proc/stat cpu line')
  })
})

describe('cpuShares', () => {
  test('idle (with iowait) and steal as shares of the time between two readings', () => {
    const before = parseCpuJiffies('cpu 100 0 50 800 20 0 0 30 0 0\n')
    const after = parseCpuJiffies('cpu 400 0 150 1000 40 0 0 130 0 0\n')
    // 720 jiffies passed: 300 user, 100 system, 200 idle and 20 iowait (30.6%), 100 stolen (13.9%)
    expect(cpuShares(before, after)).toEqual({ idlePct: 30.6, stealPct: 13.9 })
  })

  test('no time between the readings gives zeros, not NaN', () => {
    const reading = parseCpuJiffies('cpu 1 2 3 4 5 6 7 8 0 0\n')
    expect(cpuShares(reading, reading)).toEqual({ idlePct: 0, stealPct: 0 })
  })

  test('this machine: readable, and the shares of a real interval lie within 0-100%', () => {
    const before = cpuJiffies()
    const until = performance.now() + 30
    while (performance.now() < until) Math.sqrt(Math.random())
    const shares = cpuShares(before, cpuJiffies())
    for (const share of [shares.idlePct, shares.stealPct]) {
      expect(share).toBeGreaterThanOrEqual(0)
      expect(share).toBeLessThanOrEqual(100)
    }
  })
})
