import { describe, expect, test } from 'bun:test'
import {
  HOT_TABLES,
  hotTableSizes,
  needsStatistics,
  refreshPlannerStatistics,
} from '../../src/db/planner-statistics'
import { createOrganization } from '../helpers/factories'
import { makeTestContext } from '../helpers/test-app'

describe('needsStatistics', () => {
  test('a young table never analysed needs ANALYZE; small tables never', () => {
    for (const autovacuum of [true, false]) {
      expect(needsStatistics({ table: 'leads', reltuples: -1, relpages: 0, pages: 7 }, { autovacuum })).toBe(
        false,
      )
      expect(needsStatistics({ table: 'leads', reltuples: -1, relpages: 0, pages: 8 }, { autovacuum })).toBe(
        true,
      )
    }
  })

  test('a table that doubled since its statistics needs ANALYZE only where autovacuum does not run', () => {
    const grown = { table: 'leads', reltuples: 900, relpages: 20, pages: 40 }
    expect(needsStatistics(grown, { autovacuum: false })).toBe(true)
    expect(needsStatistics({ ...grown, pages: 39 }, { autovacuum: false })).toBe(false)
    expect(needsStatistics({ ...grown, reltuples: 0, relpages: 0, pages: 8 }, { autovacuum: false })).toBe(
      true,
    )
    expect(needsStatistics(grown, { autovacuum: true })).toBe(false)
  })
})

describe('refreshPlannerStatistics', () => {
  test('analyses the hot tables once they have grown, then leaves them to autovacuum', async () => {
    const ctx = await makeTestContext()
    const organization = await createOrganization(ctx)
    // Enough rows for several pages whatever the other tests left in the shared database.
    await ctx.database.query(
      `insert into leads (id, organization_id, email, email_normalized, custom_fields)
       select gen_random_uuid(), $1::uuid, 'stats-' || g || '@example.com', 'stats-' || g || '@example.com',
         '{"note": "planner statistics fixture row"}'::jsonb
       from generate_series(1, 3000) g`,
      [organization.id],
    )
    const analysed = await refreshPlannerStatistics(ctx)
    expect(analysed.every((table) => (HOT_TABLES as readonly string[]).includes(table))).toBe(true)

    const sizes = (await hotTableSizes(ctx)).filter((size) => size.table === 'leads')
    expect(sizes).toHaveLength(1)
    const [leads] = sizes
    expect(leads!.pages).toBeGreaterThanOrEqual(8)
    expect(leads!.reltuples).toBeGreaterThanOrEqual(0)
    expect(needsStatistics(leads!, { autovacuum: ctx.database.engine !== 'pglite' })).toBe(false)
    // Nothing grew since: nothing to do, and it says so.
    expect(await refreshPlannerStatistics(ctx)).toEqual([])
    await ctx.close()
  })
})
