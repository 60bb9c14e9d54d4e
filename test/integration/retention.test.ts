import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { FakeClock } from '../../src/lib/clock'
import { PURGE_BATCH_SIZE, purgeExpiredLogs } from '../../src/modules/delivery-logs/retention'
import { rollupDeliveryLogs } from '../../src/modules/delivery-logs/rollup'
import { email, post, setupSource } from '../helpers/delivery-traffic'
import { createSource } from '../helpers/factories'
import { usingRealServices } from '../helpers/test-app'

setDefaultTimeout(60_000)

const DAY = 24 * 3_600_000
const NOW = Date.UTC(2026, 4, 20, 12)

async function sourceWithHistory() {
  const clock = new FakeClock(NOW - 31 * DAY)
  const setup = await setupSource(clock)
  const sendAt = async (at: number) => {
    clock.set(at)
    expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
  }
  await sendAt(NOW - 31 * DAY)
  await rollupDeliveryLogs(setup.ctx, NOW - 31 * DAY + 3 * 3_600_000)
  await sendAt(NOW - 30 * DAY - 1000)
  await sendAt(NOW - 30 * DAY + 1000)
  await sendAt(NOW - DAY)
  // More expired rows than one batch holds, so the purge has to loop.
  await setup.ctx.database.query(
    `INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome)
     SELECT gen_random_uuid(), $1, $2, $3::timestamptz - make_interval(secs => n), 'POST', 200, 'created'
     FROM generate_series(1, $4::int) AS n`,
    [setup.source.id, setup.organization.id, new Date(NOW - 40 * DAY).toISOString(), PURGE_BATCH_SIZE + 1500],
  )
  clock.set(NOW)
  return setup
}

async function remaining(setup: Awaited<ReturnType<typeof sourceWithHistory>>) {
  const rows = await setup.ctx.database.query<{ at: string }>(
    `SELECT to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
     FROM delivery_logs WHERE source_id = $1 ORDER BY received_at`,
    [setup.source.id],
  )
  return rows.map((row) => row.at)
}

describe('log retention', () => {
  test('entries older than LOG_RETENTION_DAYS are purged in batches; newer ones stay', async () => {
    const setup = await sourceWithHistory()
    expect(await remaining(setup)).toHaveLength(PURGE_BATCH_SIZE + 1500 + 4)
    const result = await purgeExpiredLogs(setup.ctx, NOW)
    expect(result.ran).toBe(true)
    expect(result.cutoff).toBe(new Date(NOW - 30 * DAY).toISOString())
    expect(result.deletedLogs).toBeGreaterThanOrEqual(PURGE_BATCH_SIZE + 1500 + 2)
    expect(await remaining(setup)).toEqual([
      new Date(NOW - 30 * DAY + 1000).toISOString(),
      new Date(NOW - DAY).toISOString(),
    ])
    const rollups = await setup.ctx.database.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM delivery_log_hourly WHERE source_id = $1',
      [setup.source.id],
    )
    expect(rollups[0]!.n).toBe(0)
    const again = await purgeExpiredLogs(setup.ctx, NOW)
    expect(again.deletedLogs).toBe(0)
    expect(await remaining(setup)).toHaveLength(2)
  })

  test('a shorter LOG_RETENTION_DAYS keeps less', async () => {
    const setup = await sourceWithHistory()
    const ctx = { ...setup.ctx, config: { ...setup.ctx.config, logRetentionDays: 2 } }
    await purgeExpiredLogs(ctx, NOW)
    expect(await remaining(setup)).toEqual([new Date(NOW - DAY).toISOString()])
  })

  test('the expired entries of every source are found, chunk by chunk of sources, however many one source has', async () => {
    // Five sources walked two at a time: an empty one, small ones, and one with more expired entries
    // than a batch (its chunk is gone through again before the next). Each keeps its one fresh entry.
    const setup = await sourceWithHistory()
    const expiredCounts = [0, 3, PURGE_BATCH_SIZE + 7, 1, 2]
    const sources = [setup.source]
    for (let index = 1; index < expiredCounts.length; index++) {
      sources.push(
        (await createSource(setup.ctx, setup.organization.id, { name: `retention ${index}` })).source,
      )
    }
    const insert = (sourceId: string, count: number, at: number) =>
      setup.ctx.database.query(
        `INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome)
         SELECT gen_random_uuid(), $1, $2, $3::timestamptz - make_interval(secs => n), 'POST', 200, 'created'
         FROM generate_series(1, $4::int) AS n`,
        [sourceId, setup.organization.id, new Date(at).toISOString(), count],
      )
    const counts = async () =>
      Object.fromEntries(
        (
          await setup.ctx.database.query<{ source_id: string; n: number }>(
            'SELECT source_id, count(*)::int AS n FROM delivery_logs WHERE source_id = ANY($1::uuid[]) GROUP BY 1',
            [
              `{${sources
                .slice(1)
                .map((source) => source.id)
                .join(',')}}`,
            ],
          )
        ).map((row) => [row.source_id, row.n]),
      )
    for (const [index, source] of sources.entries()) {
      if (index === 0) continue
      await insert(source.id, expiredCounts[index]!, NOW - 31 * DAY)
      await insert(source.id, 1, NOW - DAY)
    }
    expect(await counts()).toEqual(
      Object.fromEntries(sources.slice(1).map((source, index) => [source.id, expiredCounts[index + 1]! + 1])),
    )

    const result = await purgeExpiredLogs(setup.ctx, NOW, { sourcesPerChunk: 2 })

    expect(result.ran).toBe(true)
    const expired = expiredCounts.reduce((sum, count) => sum + count, 0) + PURGE_BATCH_SIZE + 1500 + 2
    expect(result.deletedLogs).toBeGreaterThanOrEqual(expired)
    expect(await counts()).toEqual(Object.fromEntries(sources.slice(1).map((source) => [source.id, 1])))
    expect(await remaining(setup)).toEqual([
      new Date(NOW - 30 * DAY + 1000).toISOString(),
      new Date(NOW - DAY).toISOString(),
    ])
  })

  test.if(usingRealServices)(
    'only one replica purges at a time: the advisory lock is skipped when held',
    async () => {
      const setup = await sourceWithHistory()
      const other = postgres(setup.ctx.config.databaseUrl!, { max: 1, onnotice: () => {} })
      try {
        const [held] = await other`SELECT pg_try_advisory_lock(7364521102) AS locked`
        expect(held!.locked).toBe(true)
        const skipped = await purgeExpiredLogs(setup.ctx, NOW)
        expect(skipped).toMatchObject({ ran: false, deletedLogs: 0 })
        expect(await remaining(setup)).toHaveLength(PURGE_BATCH_SIZE + 1500 + 4)
        await other`SELECT pg_advisory_unlock(7364521102)`
        expect((await purgeExpiredLogs(setup.ctx, NOW)).ran).toBe(true)
        expect(await remaining(setup)).toHaveLength(2)
      } finally {
        await other.end()
      }
    },
  )
})
