import { describe, expect, test } from 'bun:test'
import type { GroupCommitWriter } from '../../src/modules/inbound/group-commit'
import type { InboundRepository, IngestItem, IngestRow } from '../../src/modules/inbound/repository'
import { createdRows, groupCommitWriter, leadWithEmail, requestFacts } from '../helpers/inbound'

// INGEST_GROUPS_IN_FLIGHT: the group-commit writer never has more statements running than it
// allows, and what waits meanwhile goes out as the next groups, in arrival order.

/** A repository whose statements finish only when the test says so. */
function heldRepository() {
  const running: Array<{ items: IngestItem[]; finish(): void }> = []
  let mostAtOnce = 0
  const sizes: number[] = []
  const pipelined: boolean[] = []
  const repository = {
    ingestLeads(items: readonly IngestItem[], onPipeline = false): Promise<IngestRow[]> {
      sizes.push(items.length)
      pipelined.push(onPipeline)
      return new Promise((resolve) => {
        const statement = {
          items: [...items],
          finish: () => {
            running.splice(running.indexOf(statement), 1)
            resolve(createdRows(items))
          },
        }
        running.push(statement)
        mostAtOnce = Math.max(mostAtOnce, running.length)
      })
    },
  }
  return {
    repository: repository as unknown as InboundRepository,
    running,
    sizes,
    pipelined,
    mostAtOnce: () => mostAtOnce,
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('group commit: statements in flight', () => {
  const cases: Array<{ env: Record<string, string>; allowed: number }> = [
    { env: { INGEST_GROUPS_IN_FLIGHT: '1' }, allowed: 1 },
    { env: { INGEST_GROUPS_IN_FLIGHT: '2' }, allowed: 2 },
    { env: { INGEST_GROUPS_IN_FLIGHT: '3' }, allowed: 3 },
    { env: { INGEST_GROUPS_IN_FLIGHT: '4' }, allowed: 4 },
    // Unset: one at a time, whatever the pool (the test pool has 4).
    { env: {}, allowed: 1 },
    // Never more than the pool's connections send.
    { env: { INGEST_GROUPS_IN_FLIGHT: '6' }, allowed: 4 },
  ]
  for (const { env, allowed } of cases) {
    test(`${JSON.stringify(env)}: at most ${allowed} at once, the waiting leads grouped behind them`, async () => {
      const held = heldRepository()
      const writer = groupCommitWriter(env, held.repository)
      const addresses = Array.from({ length: 8 }, (_, index) => `lead-${index}@example.com`)
      let answered = 0
      // One lead per event-loop turn: each turn would start a statement of its own if allowed.
      for (const address of addresses) {
        void writer
          .ingest({ id: 's', organizationId: 'o' }, leadWithEmail(address), requestFacts())
          .then(() => answered++)
        await nextTurn()
      }
      expect(held.running).toHaveLength(allowed)
      expect(held.running.map((statement) => statement.items.length)).toEqual(Array(allowed).fill(1))
      // Finishing them lets everything that waited go out, grouped, in arrival order.
      const written: string[] = []
      while (answered < addresses.length) {
        for (const statement of [...held.running]) {
          written.push(...statement.items.map((item) => item.email!))
          statement.finish()
        }
        await nextTurn()
      }
      expect(held.mostAtOnce()).toBe(allowed)
      expect(written).toEqual(addresses)
      // The leads that waited for a free slot went out together, as one statement.
      expect(held.sizes).toEqual([...Array(allowed).fill(1), addresses.length - allowed])
    })
  }
})

// A committed group hands its slot to the leads that waited before its own leads are answered:
// the next statement is sent in the same turn, the answers come a turn later (the database works
// on the next group while this process answers). With nothing waiting, the answers are not held.
describe('group commit: the next group before the answers', () => {
  async function run(waitingBehind: boolean): Promise<string[]> {
    const events: string[] = []
    const held = heldRepository()
    const repository = {
      ingestLeads(items: readonly IngestItem[]) {
        events.push(`sent ${items.map((item) => item.email).join(',')}`)
        return held.repository.ingestLeads(items)
      },
    } as unknown as InboundRepository
    const writer = groupCommitWriter({}, repository)
    const answered: Array<Promise<unknown>> = []
    const submit = (address: string) =>
      answered.push(
        writer
          .ingest({ id: 's', organizationId: 'o' }, leadWithEmail(address), requestFacts())
          .then((result) => events.push(`answered ${address} ${result.outcome}`)),
      )
    submit('first@example.com')
    await nextTurn()
    if (waitingBehind) {
      submit('second@example.com')
      await nextTurn()
    }
    expect(held.running).toHaveLength(1)
    held.running[0]!.finish()
    // A turn scheduled when the first statement ends: what happened before it is "the same turn".
    setImmediate(() => events.push('next turn'))
    await nextTurn()
    await nextTurn()
    for (const statement of [...held.running]) statement.finish()
    await Promise.all(answered)
    return events
  }

  test('a waiting lead goes out before the committed group is answered', async () => {
    expect(await run(true)).toEqual([
      'sent first@example.com',
      'sent second@example.com',
      'next turn',
      'answered first@example.com created',
      'answered second@example.com created',
    ])
  })

  test('with nothing waiting the committed group is answered at once', async () => {
    expect(await run(false)).toEqual([
      'sent first@example.com',
      'answered first@example.com created',
      'next turn',
    ])
  })
})

// INGEST_GROUPS_IN_FLIGHT=1 with the group commit's own connection (DatabaseHandle.pipeline): a
// group of 16 or more runs there, and a second is sent behind it once as many leads wait as it
// holds (never sooner, so groups stay as large as without it; never a third). A smaller group runs
// on the pool and nothing is sent behind it.
describe('group commit: the next group pipelined behind the running one', () => {
  const submitOnePerTurn = async (writer: GroupCommitWriter, count: number, from = 0) => {
    for (let index = from; index < from + count; index++) {
      void writer.ingest(
        { id: 's', organizationId: 'o' },
        leadWithEmail(`p-${index}@example.com`),
        requestFacts(),
      )
      await nextTurn()
    }
  }

  const cases: Array<{ running: number; waiting: number; sent: number[]; onPipeline: boolean[] }> = [
    // A small group runs on the pool: nothing behind it, however many wait.
    { running: 1, waiting: 20, sent: [1], onPipeline: [false] },
    { running: 15, waiting: 20, sent: [15], onPipeline: [false] },
    // Holds 16: fifteen waiting are not enough, sixteen are.
    { running: 16, waiting: 15, sent: [16], onPipeline: [true] },
    { running: 16, waiting: 16, sent: [16, 16], onPipeline: [true, true] },
    // Holds 20: nineteen waiting are not enough, twenty are.
    { running: 20, waiting: 19, sent: [20], onPipeline: [true] },
    { running: 20, waiting: 20, sent: [20, 20], onPipeline: [true, true] },
    // Both slots taken: what waits beyond them stays in the queue.
    { running: 20, waiting: 45, sent: [20, 20], onPipeline: [true, true] },
  ]
  test.each(cases)(
    'a group of $running running, $waiting leads arriving one per turn: groups sent $sent',
    async ({ running, waiting, sent, onPipeline }) => {
      const held = heldRepository()
      const writer = groupCommitWriter({}, held.repository, { pipeline: true })
      // The running group: its leads arrive in one turn.
      for (let index = 0; index < running; index++)
        void writer.ingest(
          { id: 's', organizationId: 'o' },
          leadWithEmail(`r-${index}@example.com`),
          requestFacts(),
        )
      await nextTurn()
      await submitOnePerTurn(writer, waiting)
      expect(held.sizes).toEqual(sent)
      expect(held.pipelined).toEqual(onPipeline)
      // Everything is written in the end, in arrival order, never more than two groups at once.
      const written: string[] = []
      while (written.length < running + waiting) {
        const first = held.running[0]
        if (!first) {
          await nextTurn()
          continue
        }
        written.push(...first.items.map((item) => item.email!))
        first.finish()
        await nextTurn()
        await nextTurn()
      }
      expect(held.mostAtOnce()).toBe(sent.length)
      expect(written).toEqual([
        ...Array.from({ length: running }, (_, index) => `r-${index}@example.com`),
        ...Array.from({ length: waiting }, (_, index) => `p-${index}@example.com`),
      ])
    },
  )

  const unpipelined: Array<{ env: Record<string, string>; pipeline: boolean }> = [
    { env: { INGEST_GROUPS_IN_FLIGHT: '2' }, pipeline: true },
    { env: {}, pipeline: false },
  ]
  test.each(unpipelined)(
    '$env, pipeline $pipeline: no group sent behind a running one on its connection',
    async ({ env, pipeline }) => {
      const held = heldRepository()
      const writer = groupCommitWriter(env, held.repository, { pipeline })
      await submitOnePerTurn(writer, 3)
      expect(held.pipelined.every((onPipeline) => !onPipeline)).toBe(true)
      expect(held.running).toHaveLength(env.INGEST_GROUPS_IN_FLIGHT ? 2 : 1)
      for (const statement of [...held.running]) statement.finish()
    },
  )
})
