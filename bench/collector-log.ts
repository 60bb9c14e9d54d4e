/**
 * JavaScriptCore's collector log (`BUN_JSC_logGC=1` on a Bun process: lines on its stderr), read as
 * collections. A collection starts at `START M <heap>kb => EdenCollection|FullCollection` and ends at
 * the first `END]` after it; each increment that stops the process prints its pause as `p=<ms>ms`.
 * A concurrent collection pauses in several increments over several lines, with the program running
 * between them, so its pause is the sum of its increments' and its span in time is not known from
 * the log (the lines carry no time): `bench:stalls` places each collection just before the moment
 * its last line reached the bench process.
 *
 * docs/benchmarks.md, "The collector's pauses, continued": a reader that took only the collections
 * ending on their first line left out about one in six of the service's.
 */
import { LineSplitter } from './support'

export interface Collection {
  kind: 'eden' | 'full'
  /** The heap when it started, in kB. */
  heapKb: number
  /** Every increment's pause summed, in ms. */
  pauseMs: number
  increments: number
}

const START = /START M (\d+)kb => (EdenCollection|FullCollection)/
const PAUSE = /p=([\d.]+)ms/g

export class CollectorLogReader {
  private readonly lines = new LineSplitter()
  private current: { kind: Collection['kind']; heapKb: number; pauses: number[] } | null = null

  /**
   * Feeds a chunk of the stream (lines may be split across chunks). Returns the collections that
   * ended in it and the lines that are not the collector's (the process's own stderr).
   */
  push(chunk: string): { collections: Collection[]; otherLines: string[] } {
    const collections: Collection[] = []
    const otherLines: string[] = []
    for (const line of this.lines.push(chunk)) this.readLine(line, collections, otherLines)
    return { collections, otherLines }
  }

  private readLine(line: string, collections: Collection[], otherLines: string[]): void {
    const start = START.exec(line)
    let rest = line
    if (start) {
      this.current = {
        kind: start[2] === 'EdenCollection' ? 'eden' : 'full',
        heapKb: Number(start[1]),
        pauses: [],
      }
      rest = line.slice(start.index)
    } else if (!this.current) {
      if (!isCollectorChatter(line)) otherLines.push(line)
      return
    }
    const current = this.current!
    const end = rest.indexOf('END]')
    for (const match of (end === -1 ? rest : rest.slice(0, end)).matchAll(PAUSE))
      current.pauses.push(Number(match[1]))
    if (end === -1) return
    collections.push({
      kind: current.kind,
      heapKb: current.heapKb,
      pauseMs: Math.round(current.pauses.reduce((sum, pause) => sum + pause, 0) * 1000) / 1000,
      increments: current.pauses.length,
    })
    this.current = null
  }
}

/** The collector's lines outside a collection's record: its prologue, epilogue and trigger notes. */
function isCollectorChatter(line: string): boolean {
  return (
    line.startsWith('[GC<') ||
    line === 'GC END!' ||
    line.startsWith('Requesting GC because') ||
    line.startsWith('Collector: [') ||
    line.trim() === ''
  )
}
