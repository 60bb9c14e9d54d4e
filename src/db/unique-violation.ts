/**
 * True when the error, or one it wraps (Drizzle wraps driver errors in `cause`), is a PostgreSQL
 * unique violation (23505) of the named constraint or unique index. Writes rely on the index rather
 * than check-then-insert, so two concurrent requests cannot both win; the name tells which rule was
 * broken. postgres.js reports it as `constraint_name`, PGlite as `constraint`; where neither is set,
 * the server's message ("violates unique constraint \"<name>\"") still names it.
 */
export function isUniqueViolation(error: unknown, constraint: string): boolean {
  for (let current: unknown = error, depth = 0; current && depth < 5; depth++) {
    const candidate = current as {
      code?: unknown
      constraint?: unknown
      constraint_name?: unknown
      message?: unknown
      cause?: unknown
    }
    if (candidate.code === '23505') {
      const name = candidate.constraint_name ?? candidate.constraint
      return name === constraint || String(candidate.message).includes(`"${constraint}"`)
    }
    current = candidate.cause
  }
  return false
}
