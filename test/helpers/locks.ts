import postgres from 'postgres'

/**
 * Runs `statement` in a transaction of a connection of its own (straight to `databaseUrl`, never
 * through a test's proxy) and keeps the transaction open, and its locks held, until the returned
 * release is called.
 */
export async function holdLock(
  databaseUrl: string,
  statement: string,
  params: string[] = [],
): Promise<() => Promise<void>> {
  const holder = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  await holder.unsafe('begin')
  await holder.unsafe(statement, params)
  return async () => {
    await holder.unsafe('rollback')
    await holder.end({ timeout: 5 })
  }
}

/** Every table of the service's schema locked against every statement of anyone else's. */
export async function holdEveryTable(databaseUrl: string): Promise<() => Promise<void>> {
  const reader = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  let tables: string[]
  try {
    tables = (
      await reader<
        { name: string }[]
      >`select tablename as name from pg_tables where schemaname = 'public' order by 1`
    ).map((row) => `"${row.name}"`)
  } finally {
    await reader.end({ timeout: 5 })
  }
  return holdLock(databaseUrl, `lock table ${tables.join(', ')} in access exclusive mode`)
}
