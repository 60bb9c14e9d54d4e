import { describe, expect, test } from 'bun:test'
import {
  type BenchDatabase,
  type Contender,
  databaseOfRound,
  fewestRunsBetweenKeyReuse,
  giveEvenRoundsOwnKeys,
  giveServicesOwnKeys,
  roundOrder,
} from '../../bench/ingest'
import { parseEnvAssignments } from '../../bench/support'

/**
 * bench:ingest's schedule against the per-key limit. The limit (60 a minute per key) is kept in the
 * database, so a service run spends its keys' budget for the next minute. With one key set for every
 * service, `service [bunsql]` ran right after `service` in rounds 1 and 3 and, being faster in round
 * 1, was answered 429 for 18,152 + 59,061 requests (docs/benchmarks.md, "The bunsql failures").
 * What must hold for any set of contenders: two service runs on one key set have another run between
 * them (a window of the limit then holds no more than one run's requests: fewestRunsBetweenKeyReuse).
 */
const SHARED = 'bench/results/keys.tmp'
const DATABASE = 'postgres://bench/db'

function contender(name: string, kind: Contender['kind'], database?: BenchDatabase): Contender {
  return {
    name,
    kind,
    database,
    start: () => Promise.reject(new Error('not started in this test')),
  }
}

const handlers = [contender('postgres.js handler', 'handler'), contender('Bun.sql handler', 'handler')]
const services = (count: number) =>
  Array.from({ length: count }, (_, index) => contender(`service ${index + 1}`, 'service'))
const ownKeySet = async (name: string): Promise<BenchDatabase> => ({
  databaseUrl: DATABASE,
  keysFile: `bench/results/keys-${name.replace(/ /g, '-')}.tmp`,
})

describe('bench:ingest key sets', () => {
  test('rounds rotate: every contender runs once per round, each first once', () => {
    const names = ['a', 'b', 'c', 'd']
    expect([1, 2, 3, 4].map((round) => roundOrder(names, round).join(''))).toEqual([
      'abcd',
      'bcda',
      'cdab',
      'dabc',
    ])
  })

  test('rounds mirrored (BENCH_ORDER=mirror): every pair of contenders in both orders every two rounds', () => {
    const names = ['a', 'b', 'c', 'd']
    expect([1, 2, 3, 4].map((round) => roundOrder(names, round, 'mirror').join(''))).toEqual([
      'abcd',
      'dcba',
      'abcd',
      'dcba',
    ])
  })

  test('on one shared key set, two services run back to back (what exhausted the keys)', () => {
    const shared = [...services(2), ...handlers]
    expect(fewestRunsBetweenKeyReuse(shared, 3, SHARED)).toBe(0)
  })

  test.each([1, 2, 3, 4, 6])(
    'with %i service contender(s) and both handlers, key sets of their own keep a run between',
    async (count) => {
      const contenders = await giveServicesOwnKeys([...services(count), ...handlers], ownKeySet)
      const keysFiles = contenders
        .filter((one) => one.kind === 'service')
        .map((one) => one.database?.keysFile)
      expect(new Set(keysFiles).size).toBe(count)
      expect(keysFiles).not.toContain(SHARED)
      expect(contenders.filter((one) => one.kind === 'handler').map((one) => one.database)).toEqual([
        undefined,
        undefined,
      ])
      expect(fewestRunsBetweenKeyReuse(contenders, 3, SHARED)).toBeGreaterThanOrEqual(1)
    },
  )

  // A12 (2026-11-26): with BENCH_ORDER=mirror the first contender ends every even round and starts
  // the next odd one, so `service` ran its rounds 2 and 3 back to back on its database's keys and was
  // answered 429 at two levels. Every order and shape of contender list, both key-set layouts.
  const a12 = () => [
    contender('service', 'service', { databaseUrl: `${DATABASE}_v_default`, keysFile: 'keys-v_default.tmp' }),
    contender('service [endpoint]', 'service', {
      databaseUrl: `${DATABASE}_v_endpoint`,
      keysFile: 'keys-v_endpoint.tmp',
    }),
    {
      ...contender('baseline ca30638', 'service', {
        databaseUrl: `${DATABASE}_ca30638`,
        keysFile: 'keys-ca30638.tmp',
      }),
      checkout: '/tmp/lead-capture-baseline-ca30638',
    },
    ...handlers,
  ]
  const evenRoundKeys = async (one: Contender): Promise<BenchDatabase> => ({
    ...one.database!,
    keysFile: one.database!.keysFile.replace('.tmp', '-even.tmp'),
  })

  test('mirrored rounds on one key set per service: the first contender runs twice back to back', () => {
    expect(fewestRunsBetweenKeyReuse(a12(), 4, SHARED, 'mirror')).toBe(0)
  })

  test.each([
    ['mirror', 2],
    ['mirror', 4],
    ['mirror', 6],
    ['rotate', 3],
    ['rotate', 4],
  ] as const)(
    '%s order, %i rounds: with even-round key sets every key set has a run between its uses',
    async (order, rounds) => {
      for (const list of [a12(), await giveServicesOwnKeys([...services(3), ...handlers], ownKeySet)]) {
        const contenders = await giveEvenRoundsOwnKeys(list, evenRoundKeys, order)
        expect(fewestRunsBetweenKeyReuse(contenders, rounds, SHARED, order)).toBeGreaterThanOrEqual(1)
      }
    },
  )

  test('the even-round key set is the same database, its own keys, used in even rounds only', async () => {
    const [service, , baseline] = await giveEvenRoundsOwnKeys(a12(), evenRoundKeys, 'mirror')
    expect([1, 2, 3, 4].map((round) => databaseOfRound(service!, round)?.keysFile)).toEqual([
      'keys-v_default.tmp',
      'keys-v_default-even.tmp',
      'keys-v_default.tmp',
      'keys-v_default-even.tmp',
    ])
    expect(databaseOfRound(service!, 2)?.databaseUrl).toBe(`${DATABASE}_v_default`)
    // A baseline's database is made by its own commit's CLI: no sources are added to it by this one.
    expect(databaseOfRound(baseline!, 2)).toEqual(baseline!.database)
    expect(handlers.map((one) => databaseOfRound(one, 2))).toEqual([undefined, undefined])
  })

  test('rotated rounds never put a contender back to back: no second key set is made', async () => {
    const made: string[] = []
    const given = await giveEvenRoundsOwnKeys(
      a12(),
      async (one) => {
        made.push(one.name)
        return evenRoundKeys(one)
      },
      'rotate',
    )
    expect(made).toEqual([])
    expect(given.map((one) => databaseOfRound(one, 2))).toEqual(a12().map((one) => one.database))
  })

  test('a baseline keeps its own database and keys', async () => {
    const baseline = contender('baseline abc1234', 'service', {
      databaseUrl: 'postgres://bench/db_abc1234',
      keysFile: 'bench/results/keys-abc1234.tmp',
    })
    const [given] = await giveServicesOwnKeys([baseline], ownKeySet)
    expect(given!.database).toEqual(baseline.database)
  })
})

describe("a contender's extra environment, NAME=value+NAME=value", () => {
  test.each<[string, Record<string, string> | string]>([
    ['INGEST_GROUPS_IN_FLIGHT=2', { INGEST_GROUPS_IN_FLIGHT: '2' }],
    ['A=1+B=two', { A: '1', B: 'two' }],
    // A value keeps its own `=` (base64 padding, a URL's query; a `+` still separates).
    ['WEBHOOK_SECRETS_KEY=abc=+B=x=y', { WEBHOOK_SECRETS_KEY: 'abc=', B: 'x=y' }],
    ['A=', { A: '' }],
    ['A', 'A: A is not NAME=value'],
    ['A=1+B', 'A=1+B: B is not NAME=value'],
    ['=1', '=1: =1 is not NAME=value'],
  ])('%s', (spec, expected) => {
    if (typeof expected === 'string') expect(() => parseEnvAssignments(spec)).toThrow(expected)
    else expect(parseEnvAssignments(spec)).toEqual(expected)
  })
})
