import { describe, expect, test } from 'bun:test'
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { openDatabase } from '../../src/db/client'
import { MIGRATIONS_FOLDER, runMigrations } from '../../src/db/migrate'
import { sqlRows } from '../../src/db/rows'
import { newId } from '../../src/lib/ids'
import { createMemoryLogger } from '../../src/lib/logger'
import { testConfig } from '../helpers/test-app'

/** `drizzle/` as it was up to and including the migration numbered `last`. */
function migrationsUpTo(last: number): { folder: string; remove: () => void } {
  const folder = mkdtempSync(join(tmpdir(), 'migrations-'))
  cpSync(MIGRATIONS_FOLDER, folder, { recursive: true })
  const journalFile = join(folder, 'meta/_journal.json')
  const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as { entries: Array<{ idx: number }> }
  journal.entries = journal.entries.filter((entry) => entry.idx <= last)
  writeFileSync(journalFile, JSON.stringify(journal))
  return { folder, remove: () => rmSync(folder, { recursive: true, force: true }) }
}

// drizzle/0021 replaced the messages' fan_out_pending flag with the fan-out queue: an event that a
// database upgraded mid-backlog had not fanned out yet must still be fanned out once after it.
describe('drizzle/0021: the fan-out queue', () => {
  test('lead events not fanned out before the upgrade are queued by it; the others are not', async () => {
    const config = testConfig({ DATABASE_URL: '' })
    const database = await openDatabase(config, { inMemory: true })
    const before = migrationsUpTo(20)
    try {
      const { migrate } = await import('drizzle-orm/pglite/migrator')
      await migrate(database.db as never, { migrationsFolder: before.folder })
      const organizationId = newId()
      const [pending, done] = [newId(), newId()]
      await database.db.execute(sql`
        insert into webhook_messages (id, organization_id, event_type, payload, created_at, fan_out_pending)
        values (${pending}::uuid, ${organizationId}::uuid, 'lead.created', '{}'::jsonb, now(), true),
          (${done}::uuid, ${organizationId}::uuid, 'lead.created', '{}'::jsonb, now(), false)`)

      await runMigrations(config, database, createMemoryLogger('silent'))

      const queued = await sqlRows<{ id: string }>(database.db, sql`select id from webhook_fan_out_queue`)
      expect(queued).toEqual([{ id: pending }])
      const columns = await sqlRows<{ column_name: string }>(
        database.db,
        sql`select column_name from information_schema.columns
            where table_name = 'webhook_messages' and column_name = 'fan_out_pending'`,
      )
      expect(columns).toEqual([])
      const messages = await sqlRows<{ id: string }>(
        database.db,
        sql`select id from webhook_messages order by id`,
      )
      expect(messages.map((row) => row.id)).toEqual([pending, done].sort())
    } finally {
      before.remove()
      await database.close()
    }
  })
})
