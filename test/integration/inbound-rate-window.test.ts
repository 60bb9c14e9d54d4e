import { describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { createOrganization, createSource } from '../helpers/factories'
import { makeTestApp } from '../helpers/test-app'

// inbound_rate_take() (drizzle/functions) against a model of the per-key limit: a sliding log of the
// last minute's counted requests, at most 60 (spec §8). The function keeps each key's times in
// ascending order and finds the expired ones by binary search (drizzle/0017), so the class under
// test is every order the times can arrive in: in order, out of order (two replicas commit out of
// time order), equal times, a time exactly 60 s after a hit, a full window, and several items of
// one key in one group (the function's second path), mixed with other keys.

const LIMIT = 60
const WINDOW_MS = 60_000

interface Item {
  idx: number
  source_id: string
  received_at: string
}

interface Verdict {
  idx: number
  allowed: boolean
  remaining: number
  reset_ms: number
}

/** The per-key limit as the spec states it, one item after another in idx order. */
class SlidingLog {
  private readonly hits = new Map<string, number[]>()

  take(source: string, at: number): Omit<Verdict, 'idx'> {
    const kept = (this.hits.get(source) ?? []).filter((hit) => hit > at - WINDOW_MS)
    const allowed = kept.length < LIMIT
    if (allowed) this.hits.set(source, [...kept, at])
    const counted = allowed ? [...kept, at] : kept
    return {
      allowed,
      remaining: Math.max(0, LIMIT - counted.length),
      reset_ms: Math.min(...counted) + WINDOW_MS - at,
    }
  }

  stored(source: string): number[] {
    return this.hits.get(source) ?? []
  }
}

/** A key's stored window as epoch milliseconds, in the array's own order. */
async function storedTimes(ctx: AppContext, sourceId: string): Promise<number[]> {
  const rows = await ctx.database.query<{ at: number | string }>(
    `select (extract(epoch from h.at) * 1000)::float8 as at
       from inbound_rate_windows w, unnest(w.hits) with ordinality as h(at, position)
      where w.source_id = $1 order by h.position`,
    [sourceId],
  )
  return rows.map((row) => Math.round(Number(row.at)))
}

/** A deterministic generator (mulberry32), so a failure can be replayed from its seed. */
function random(seed: number) {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let value = Math.imul(state ^ (state >>> 15), 1 | state)
    value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296
  }
}

describe('inbound_rate_take(): the per-key sliding window', () => {
  for (const seed of [1, 2, 3]) {
    test(`seed ${seed}: every verdict and every stored window equal the sliding log's, in any arrival order`, async () => {
      const { ctx } = await makeTestApp()
      const organization = await createOrganization(ctx)
      const sources = [
        (await createSource(ctx, organization.id)).source.id,
        (await createSource(ctx, organization.id)).source.id,
      ]
      const model = new SlidingLog()
      const next = random(seed)
      let clock = Date.UTC(2026, 0, 1)
      const previous: number[] = []
      let calls = 0
      let refused = 0
      let outOfOrder = 0
      while (calls < 160) {
        // A group of one to four items; mostly the first key (so it fills its window), sometimes the
        // same key twice or more (the function's loop path).
        const size = 1 + Math.floor(next() * 4)
        const items: Item[] = []
        const times: number[] = []
        for (let idx = 0; idx < size; idx++) {
          clock += Math.floor(next() * 900)
          const roll = next()
          let at = clock
          if (roll < 0.15 && previous.length > 0) {
            // committed after a later one: before the latest time already written
            at = clock - 1 - Math.floor(next() * 400)
            outOfOrder++
          } else if (roll < 0.25 && previous.length > 0) {
            // the same millisecond as an earlier hit, or exactly 60 s after one
            const earlier = previous[Math.floor(next() * previous.length)]!
            at = earlier + WINDOW_MS <= clock ? earlier + WINDOW_MS : earlier
          }
          times.push(at)
          const source = next() < 0.85 ? sources[0]! : sources[1]!
          items.push({ idx, source_id: source, received_at: new Date(at).toISOString() })
        }
        previous.push(...times)
        const rows = await ctx.database.query<Verdict>(
          'select idx, allowed, remaining, reset_ms from inbound_rate_take($1::jsonb) order by idx',
          [JSON.stringify(items)],
        )
        const expected = items.map((item, index) => ({
          idx: item.idx,
          ...model.take(item.source_id, times[index]!),
        }))
        expect(rows).toEqual(expected)
        refused += expected.filter((verdict) => !verdict.allowed).length
        for (const source of sources) {
          const stored = await storedTimes(ctx, source)
          // The same times, ascending: the order the binary search relies on.
          expect(stored).toEqual([...model.stored(source)].sort((a, b) => a - b))
        }
        calls++
      }
      // The run went through the cases it is for.
      expect(refused).toBeGreaterThan(0)
      expect(outOfOrder).toBeGreaterThan(10)
    }, 60_000)
  }

  test('a window stored out of order before drizzle/0017 is sorted by the migration', async () => {
    const { ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const { source } = await createSource(ctx, organization.id)
    await ctx.database.query(
      `insert into inbound_rate_windows (source_id, hits) values ($1, array['2026-01-01T00:00:02Z', '2026-01-01T00:00:01Z', '2026-01-01T00:00:03Z']::timestamptz[])`,
      [source.id],
    )
    const migration = await Bun.file(
      new URL('../../drizzle/0017_rate_windows_sorted.sql', import.meta.url),
    ).text()
    await ctx.database.query(migration.replace(/--[^\n]*\n/g, ''), [])
    const second = Date.UTC(2026, 0, 1, 0, 0, 1)
    expect(await storedTimes(ctx, source.id)).toEqual([second, second + 1000, second + 2000])
  })
})
