import type { SQL } from 'drizzle-orm'

/** Anything Drizzle can run a `sql` template on: the database or a transaction. */
export interface SqlExecutor {
  execute(query: SQL): PromiseLike<unknown>
}

/**
 * Runs a Drizzle `sql` template and returns its rows, typed, on both drivers: postgres.js answers
 * the rows themselves, PGlite an object with `rows`. The one way to run what the query builder
 * cannot express (SQL function calls, set-based statements, `FOR UPDATE SKIP LOCKED` claims,
 * roll-ups); see docs/architecture.md "Speaking SQL". Both drivers return timestamps as text
 * here (Drizzle's parsers), so a row has one shape whichever runs it. The statement is sent
 * unnamed (parsed on every call), like the builder's queries that are not `.prepare()`d.
 */
export async function sqlRows<Row>(executor: SqlExecutor, query: SQL): Promise<Row[]> {
  const result = await executor.execute(query)
  return (Array.isArray(result) ? result : (result as { rows: Row[] }).rows) as Row[]
}
