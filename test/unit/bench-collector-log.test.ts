import { describe, expect, test } from 'bun:test'
import { CollectorLogReader } from '../../bench/collector-log'

/**
 * `bench:stalls` reads the service's collector log (`BUN_JSC_logGC=1`) to put every collection on
 * its timeline (bench/stall-timeline.ts). Lines copied from a run of the service on 2026-11-27
 * (bench/results/e-2026-11-27/e3.txt.gz): an eden collection in one increment, and a full collection
 * that paused the process in five, each increment on a line of its own.
 */
const EDEN =
  '[GC<0x5c974208118>: START M 21424kb => EdenCollection, a=0kb hf=0.000 mu=0.600 v=0kb (C:0 M:0 P1:0) o=22 b=319 i#1:N<CsMsrShDMsm(352)SrbBcs> 0+0 v=83kb (C:0 M:0 P1:83) o=26 b=319 i#2:N<WsOJw>Pbc 2+0 v=83kb (C:0 M:0 P1:83) o=26 b=319 i#3:P<OWsJwMsm(0)ShCsBcsSrbMsrDCbDomo>Pbc => 14681kb, p=2.104099ms (max 6.996653), cycle 2.080704ms END]'
const FULL = [
  '[GC<0x5c974208118>: START M 13307kb => FullCollection, a=0kb hf=0.000 mu=0.600 v=0kb (C:0 M:0 P1:0) o=0 b=1978 i#1:N<CsMsrShDMsm(0)SrbBcs> 55+0 p=1.076490ms (max 1.939304)...]',
  '[GC<0x5c974208118>: M a=27kb hf=0.004 mu=0.597 v=1861kb (C:577 M:0 P1:1283) o=2 b=19 0+10 p=0.718778ms (max 1.939304)...]',
  '[GC<0x5c974208118>: M a=49kb hf=0.008 mu=0.595 v=3560kb (C:1002 M:0 P1:2558) o=3 b=22 0+32 p=0.583928ms (max 1.939304)...]',
  '[GC<0x5c974208118>: M a=49kb hf=0.008 mu=0.595 v=4568kb (C:1292 M:0 P1:3275) o=3 b=5 0+37 p=0.450469ms (max 1.939304)...]',
  '[GC<0x5c974208118>: M a=49kb hf=0.008 mu=0.595 v=5876kb (C:1622 M:0 P1:4254) o=9 b=0 1+37 v=6679kb (C:2006 M:0 P1:4673) o=11 b=0 i#2:N<WsOJw>Pbc 15+37 v=6687kb (C:2012 M:0 P1:4675) o=11 b=0 i#3:P<OWsJwShMsrCsMsm(37)>Pbc 0+37 v=6688kb (C:2012 M:0 P1:4675) o=11 b=0 i#4:P<Msm(0)SrbBcsShMsrCsDCbDomoOWsJw>Pbc => 10490kb, p=4.139775ms (max 4.139775), cycle 12.475529ms END]',
  'GC END!',
  '[GC<0x5c974208118>: epilogue 0.108020ms]',
]
const TRIGGER =
  'Requesting GC because bytes allocated this cycle: 8401882 exceed bytes allowed: 8388608 normal bytes: 8401882 oversized bytes: 0 last oversized: 0'
const FULL_PAUSE_MS = 1.07649 + 0.718778 + 0.583928 + 0.450469 + 4.139775

describe('CollectorLogReader', () => {
  test("a collection in one increment and one in five: every increment's pause summed", () => {
    const reader = new CollectorLogReader()
    const { collections, otherLines } = reader.push(`${TRIGGER}\n${EDEN}\nGC END!\n${FULL.join('\n')}\n`)
    expect(collections).toEqual([
      { kind: 'eden', heapKb: 21424, pauseMs: 2.104, increments: 1 },
      { kind: 'full', heapKb: 13307, pauseMs: Math.round(FULL_PAUSE_MS * 1000) / 1000, increments: 5 },
    ])
    expect(otherLines).toEqual([])
  })

  test('lines split across chunks at every offset give the same collections', () => {
    const text = `${FULL.join('\n')}\n${EDEN}\n`
    for (let cut = 1; cut < text.length; cut += 37) {
      const reader = new CollectorLogReader()
      const first = reader.push(text.slice(0, cut))
      const second = reader.push(text.slice(cut))
      const collections = [...first.collections, ...second.collections]
      expect(collections.map((collection) => [collection.kind, collection.increments])).toEqual([
        ['full', 5],
        ['eden', 1],
      ])
      expect(collections[0]!.pauseMs).toBe(Math.round(FULL_PAUSE_MS * 1000) / 1000)
    }
  })

  test("the process's own stderr lines are handed back, the collector's chatter is not", () => {
    const reader = new CollectorLogReader()
    const { collections, otherLines } = reader.push(
      `error: something the service wrote\n[GC<0x1>: starting 0.027741ms]\n${EDEN}\nGC END!\n[GC<0x1>: epilogue 0.05ms]\nsecond line\n`,
    )
    expect(collections).toHaveLength(1)
    expect(otherLines).toEqual(['error: something the service wrote', 'second line'])
  })

  test('a collection whose end has not arrived yet is not reported', () => {
    const reader = new CollectorLogReader()
    expect(reader.push(`${FULL.slice(0, 3).join('\n')}\n`).collections).toEqual([])
    expect(reader.push(`${FULL.slice(3).join('\n')}\n`).collections).toHaveLength(1)
  })
})
