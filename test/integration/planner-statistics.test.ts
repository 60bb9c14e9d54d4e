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
    expect(needsStatistics(leads!, leads!)).toBe(false)
    // Nothing grew since: nothing to do, and it says so.
    expect(await refreshPlannerStatistics(ctx)).toEqual([])
    await ctx.close()
  })

  test('autovacuum is read from the server and the table, not assumed: off, the job re-analyses a doubled table', async () => {
    const ctx = await makeTestContext()
    const organization = await createOrganization(ctx)
    const insertLeads = (count: number) =>
      ctx.database.query(
        `insert into leads (id, organization_id, email, email_normalized, custom_fields)
         select gen_random_uuid(), $1::uuid, 'grow-' || gen_random_uuid() || '@example.com',
           'grow-' || gen_random_uuid() || '@example.com', '{"note": "planner statistics growth row"}'::jsonb
         from generate_series(1, $2::int) g`,
        [organization.id, count],
      )
    await insertLeads(3000)
    await refreshPlannerStatistics(ctx)
    if (ctx.database.engine === 'pglite') {
      // No autovacuum process: every size says so, whatever PGlite reports for the setting.
      expect((await hotTableSizes(ctx)).map((size) => size.autovacuum)).toEqual(HOT_TABLES.map(() => false))
    } else {
      const [server] = await ctx.database.query<{ on: boolean }>(
        `select current_setting('autovacuum') = 'on' and current_setting('track_counts') = 'on' as on`,
        [],
      )
      expect((await hotTableSizes(ctx)).map((size) => size.autovacuum)).toEqual(
        HOT_TABLES.map(() => server!.on),
      )
      // Off for the table itself (as an operator may set it): the job must take over.
      await ctx.database.query('alter table leads set (autovacuum_enabled = false)', [])
    }
    try {
      const [before] = (await hotTableSizes(ctx)).filter((size) => size.table === 'leads')
      expect(before!.autovacuum).toBe(false)
      // Grow leads to twice the pages its statistics were taken at, in steps of half its rows
      // (whatever the other tests left in a database kept between runs).
      while (
        (await hotTableSizes(ctx)).find((size) => size.table === 'leads')!.pages <
        2 * before!.relpages
      ) {
        await insertLeads(Math.max(3000, Math.ceil(before!.reltuples / 2)))
      }
      expect(await refreshPlannerStatistics(ctx)).toContain('leads')
      const [after] = (await hotTableSizes(ctx)).filter((size) => size.table === 'leads')
      expect(after!.relpages).toBe(after!.pages)
      expect(await refreshPlannerStatistics(ctx)).not.toContain('leads')
    } finally {
      if (ctx.database.engine !== 'pglite') {
        await ctx.database.query('alter table leads reset (autovacuum_enabled)', [])
        // The rows grown here go again, and VACUUM hands their pages back (they are the table's
        // last): on a database kept between runs the table would otherwise double with every run,
        // and the third or fourth run's growth took longer than the test's 30 s.
        await ctx.database.query('delete from leads where organization_id = $1::uuid', [organization.id])
        await ctx.database.query('vacuum leads', [])
      }
      await ctx.close()
    }
  })
})
