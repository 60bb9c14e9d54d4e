import { SQL } from 'bun'
import { bunSqlConnection, type DatabaseTarget } from './database-url'

/**
 * DATABASE_DRIVER=bun-sql: the parameterised statements of `DatabaseHandle.query` whose parameters
 * are all scalars (the delivery log's, the webhook worker's, and the group commit's
 * `ingest_leads($1::jsonb)` for a group not sent on its own pipelined connection, src/db/client.ts) go
 * through Bun's built-in client; Drizzle, LISTEN/NOTIFY and the statements with array parameters
 * stay on postgres.js. The same least-work handler is ~1.3× faster on Bun.sql (docs/benchmarks.md).
 *
 * What differs from postgres.js, and is made the same here:
 * - A JS string bound to a `jsonb` parameter is sent as a JSON *string* (`"{…}"`), not as the
 *   document it holds. The callers pass JSON text, so `$n::jsonb` is sent as `$n::text::jsonb`: the
 *   server parses the text, as it does with postgres.js.
 * - Errors carry the SQLSTATE in `errno` and a driver code (`ERR_POSTGRES_…`) in `code`. They are
 *   rethrown with the SQLSTATE (or a connection code src/lib/errors.ts knows) in `code`, so the
 *   503 classification, unique-violation checks and the error log read them as before.
 */
export interface HotStatements {
  /** True when this client sends the statement (every parameter a string, number, boolean or null). */
  accepts(params: unknown[]): boolean
  query<Row>(text: string, params: unknown[]): Promise<Row[]>
  ping(): Promise<void>
  /** Closes the pool, waiting at most `timeoutSeconds` for what runs (0: at once). */
  close(timeoutSeconds: number): Promise<void>
}

export function openBunSql(
  target: DatabaseTarget,
  max: number,
  connection: Record<string, string>,
): HotStatements {
  // Options, not the URL: the service reads DATABASE_URL itself (src/db/database-url.ts).
  const client = new SQL({
    ...bunSqlConnection(target),
    max,
    // The same bounds as the postgres.js pool (src/db/client.ts): a lost database answers 503 quickly.
    connectionTimeout: 3,
    idleTimeout: 60,
    maxLifetime: 60 * 30,
    prepare: true,
    // the session settings of every pool's connections (src/db/client.ts connectionSettings)
    connection,
  })
  return {
    accepts(params) {
      for (const param of params) {
        const type = typeof param
        if (param !== null && type !== 'string' && type !== 'number' && type !== 'boolean') return false
      }
      return true
    },
    async query<Row>(text: string, params: unknown[]) {
      const statement = jsonbAsText(text)
      try {
        return (await client.unsafe(statement, params as never[])) as Row[]
      } catch (error) {
        throw asPostgresJsError(error, text)
      }
    },
    async ping() {
      try {
        await client.unsafe('select 1')
      } catch (error) {
        throw asPostgresJsError(error, 'select 1')
      }
    },
    async close(timeoutSeconds) {
      await client.close({ timeout: timeoutSeconds })
    },
  }
}

const jsonbRewritten = new Map<string, string>()

/**
 * The statement with every `$n::jsonb` bound as text (`$n::text::jsonb`): the callers pass JSON
 * text, which the server then parses. Bun.sql would send a string as a JSON string, and postgres.js
 * does the same for a parameter it has described as jsonb. Kept per statement text.
 */
export function jsonbAsText(text: string): string {
  let statement = jsonbRewritten.get(text)
  if (statement === undefined) {
    statement = text.replace(/(\$\d+)::jsonb\b/g, '$1::text::jsonb')
    jsonbRewritten.set(text, statement)
  }
  return statement
}

/** Bun.sql's connection failures under the codes src/lib/errors.ts counts as "cannot serve now". */
const CONNECTION_CODES: Record<string, string> = {
  ERR_POSTGRES_CONNECTION_REFUSED: 'ECONNREFUSED',
  ERR_POSTGRES_CONNECTION_TIMEOUT: 'CONNECT_TIMEOUT',
  ERR_POSTGRES_CONNECTION_CLOSED: 'CONNECTION_CLOSED',
  ERR_POSTGRES_IDLE_TIMEOUT: 'CONNECTION_CLOSED',
  ERR_POSTGRES_LIFETIME_TIMEOUT: 'CONNECTION_CLOSED',
}

export class BunSqlError extends Error {
  constructor(
    message: string,
    readonly code: string,
    /** The statement text (placeholders, never values), as postgres.js errors carry it. */
    readonly query: string,
    readonly constraint_name: string | undefined,
    options: { cause: unknown },
  ) {
    super(message, options)
    this.name = 'BunSqlError'
  }
}

function asPostgresJsError(error: unknown, text: string): unknown {
  if (!(error instanceof Error)) return error
  const fields = error as Error & { code?: unknown; errno?: unknown; constraint?: unknown }
  const sqlstate =
    typeof fields.errno === 'string' && /^[0-9A-Z]{5}$/.test(fields.errno) ? fields.errno : undefined
  const driverCode = typeof fields.code === 'string' ? fields.code : ''
  const code =
    sqlstate ??
    CONNECTION_CODES[driverCode] ??
    (driverCode.startsWith('ERR_POSTGRES_CONNECTION') ? 'CONNECTION_CLOSED' : undefined)
  if (code === undefined) return error
  const constraint = typeof fields.constraint === 'string' ? fields.constraint : undefined
  return new BunSqlError(error.message, code, text, constraint, { cause: error })
}
