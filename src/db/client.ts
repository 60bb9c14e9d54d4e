import { mkdirSync } from 'node:fs'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type { Config } from '../config'
import { describeDatabaseError, READ_ONLY_TRANSACTION } from '../lib/errors'
import { type HotStatements, jsonbAsText, openBunSql } from './bun-sql'
import { acquireDataDirLock } from './data-dir-lock'
import {
  type DatabaseTarget,
  describeTarget,
  parseDatabaseUrl,
  postgresJsConnection,
  startupOptions,
} from './database-url'
import { type PoolRenewal, RenewablePool } from './renewable-pool'
import * as schema from './schema'

export type Schema = typeof schema
export type Database = PgDatabase<PgQueryResultHKT, Schema>

export interface DatabaseHandle {
  engine: 'postgres' | 'pglite'
  db: Database
  /** Human-readable location for start-up logs, without credentials. */
  location: string
  ping(): Promise<void>
  /**
   * LISTEN on a channel. `onConnect` runs on every (re)connection of the listener: notifications
   * sent while it was down are lost, so callers drop whatever they cached.
   */
  listen(channel: string, onMessage: (payload: string) => void, onConnect?: () => void): Promise<void>
  notify(channel: string, payload: string): Promise<void>
  /**
   * A parameterised statement sent as-is and prepared once per connection (a named statement on
   * postgres.js, where Drizzle's `execute` sends unnamed ones). Kept for the inbound hot path, which
   * calls ingest_leads() for every group of accepted leads (src/modules/inbound/repository.ts).
   * Everything else goes through Drizzle (planner statistics too, since its pool is watched): the builder, or
   * `sql` templates through sqlRows (src/db/rows.ts); docs/architecture.md "Speaking SQL".
   */
  query<Row>(text: string, params: unknown[]): Promise<Row[]>
  /**
   * How many statements of `query` can run at once: the connections that send the hot statement
   * (the Bun.sql share of the pool with DATABASE_DRIVER=bun-sql, the whole pool otherwise, 1 on
   * PGlite). The group commit keeps no more groups in flight: a group sent while every connection is
   * busy waits inside the driver with the leads it had, while in the writer's queue it would have
   * gathered the leads that arrive meanwhile (bun-sql with 10 groups on 7 connections sent ~1.8×
   * the statements per lead of postgres.js).
   */
  queryConcurrency: number
  /**
   * The group commit's own connection for its large groups (INGEST_PIPELINE on PostgreSQL with a
   * pool of 3 or more; null otherwise): a statement sent while another runs is written at once and
   * waits on the server's side, which runs it the moment the first ends, without waiting for this
   * process to read the first's answer (postgres.js pipelines; Bun.sql does not).
   * docs/architecture.md "Group commit".
   */
  pipeline: PipelinedStatements | null
  /**
   * Opens new connections for `query`'s Bun.sql pool and the pipeline's connection and closes the
   * old ones at once, failing what still runs on them. The group commit calls it when a group's
   * answer did not come within INGEST_ANSWER_TIMEOUT_MS: a database host that vanished without
   * closing its connections leaves them waiting for ~15 minutes (TCP's retransmissions), or for
   * ever behind a proxy that keeps them open, and a pool would keep handing them out. postgres.js'
   * shared pool (Drizzle's, and `query`'s with DATABASE_DRIVER=postgres-js) and PGlite are kept.
   * Whether there was anything to replace.
   */
  replaceHotConnections(): boolean
  /**
   * Called whenever postgres.js' shared pool was found to have lost its server and was replaced
   * (src/db/renewable-pool.ts, DATABASE_UNANSWERED_CHECK_MS); never on PGlite.
   */
  onPoolRenewed(listener: (renewal: PoolRenewal) => void): void
  /**
   * A connection of its own for work that needs one session throughout (the log retention's
   * session lock and the batches it guards), named `lead-capture-<name>` in pg_stat_activity. It
   * starts with the pools' settings (DATABASE_LOCK_TIMEOUT_MS) and is watched as the shared pool is
   * (DATABASE_UNANSWERED_CHECK_MS): a statement on it whose server vanished fails with
   * CONNECTION_DESTROYED within about twice the check instead of waiting until TCP gives up, and
   * the renewal is reported to onPoolRenewed with the session's name. Every database connection of
   * a replica is opened here, in src/db/ (test/unit/database-connections.test.ts). null on PGlite,
   * whose one session is `db`'s.
   */
  openSession(name: string): DatabaseSession | null
  close(): Promise<void>
}

/** A connection of its own (DatabaseHandle.openSession); `end` closes it. */
export interface DatabaseSession {
  db: Database
  end(): Promise<void>
}

/** Statements on one connection, run by the server one after another in the order sent. */
export interface PipelinedStatements {
  query<Row>(text: string, params: unknown[]): Promise<Row[]>
}

export async function openDatabase(
  config: Config,
  options: { inMemory?: boolean } = {},
): Promise<DatabaseHandle> {
  if (config.databaseUrl) return openPostgres(parseDatabaseUrl(config.databaseUrl), config)
  return openPglite(options.inMemory ? undefined : config.dataDir)
}

/**
 * How DATABASE_POOL_SIZE is split. With INGEST_PIPELINE, from 3 up, one connection is the group
 * commit's own (`DatabaseHandle.pipeline`). With DATABASE_DRIVER=bun-sql a third of the pool (at
 * least one) stays with postgres.js for Drizzle's queries (management, a source not yet cached) and
 * the rest serves the hot statements; with postgres-js the rest is postgres.js'. The budget of
 * docs/operations.md (pool + 1 listener per replica) holds either way.
 */
export function splitPool(
  poolSize: number,
  driver: Config['databaseDriver'] = 'bun-sql',
  pipeline = false,
): { postgresJs: number; bunSql: number; groupCommit: number } {
  const groupCommit = pipeline && poolSize >= 3 ? 1 : 0
  if (driver === 'postgres-js') return { postgresJs: poolSize - groupCommit, bunSql: 0, groupCommit }
  const postgresJs = Math.max(1, Math.floor(poolSize / 3))
  return { postgresJs, bunSql: poolSize - postgresJs - groupCommit, groupCommit }
}

/**
 * The session settings every connection of the service's pools starts with (sent at connection
 * start, no round trip of their own; the migrations' client has none of them). `lock_timeout`: a
 * statement that waits longer than DATABASE_LOCK_TIMEOUT_MS for a lock another session holds (an
 * `ALTER TABLE`, a `LOCK TABLE`, a source being deleted) fails with 55P03 and its transaction rolls
 * back, so its request is answered 503 with nothing written instead of waiting as long as the lock
 * is held (src/lib/errors.ts, docs/operations.md "Lock waits").
 */
export function connectionSettings(lockTimeoutMs: number): Record<string, string> {
  return { application_name: 'lead-capture', lock_timeout: String(lockTimeoutMs) }
}

/** At most one reconnection of every pool per this long for a server that takes no writes. */
export const READ_ONLY_RECONNECT_INTERVAL_MS = 5_000

/** postgres.js' settings for both its clients: the shared pool and the group commit's connection. */
const POSTGRES_JS_OPTIONS = {
  // A lost database must surface quickly as 503, not as a request that waits forever.
  connect_timeout: 3,
  // postgres.js waits (0.5..1) × min(3^n / 100, 20) s before reconnecting after the n-th failed
  // attempt, n shared by the pool and growing for every request during an outage: a few seconds
  // of outage left queries (and the LISTEN connection) waiting up to 20 s after the database came
  // back. A short, bounded wait keeps outage answers quick and recovery within a second.
  backoff: (attempt: number) => Math.min(0.05 * attempt, 0.5),
  idle_timeout: 60,
  max_lifetime: 60 * 30,
  prepare: true,
  onnotice: () => {},
} satisfies postgres.Options<Record<string, postgres.PostgresType>>

function openPostgres(
  target: DatabaseTarget,
  config: Pick<
    Config,
    | 'databasePoolSize'
    | 'databaseDriver'
    | 'ingestPipeline'
    | 'databaseLockTimeoutMs'
    | 'databaseUnansweredCheckMs'
  >,
): DatabaseHandle {
  const pools = splitPool(config.databasePoolSize, config.databaseDriver, config.ingestPipeline)
  const connection = { ...startupOptions(target), ...connectionSettings(config.databaseLockTimeoutMs) }
  // Every postgres.js client of the replica: the target as the service read it (src/db/database-url.ts).
  const postgresJs = (options: postgres.Options<Record<string, postgres.PostgresType>>) =>
    postgres({ ...postgresJsConnection(target), ...POSTGRES_JS_OPTIONS, ...options })
  const openHot = () => (pools.bunSql > 0 ? openBunSql(target, pools.bunSql, connection) : null)
  // One connection: postgres.js writes a statement on a busy connection at once (up to 100), so
  // the server runs the next group the moment the last one commits.
  const openGroupCommit = () => (pools.groupCommit > 0 ? postgresJs({ connection, max: 1 }) : null)
  // Replaced whole by replaceHotConnections: every use below reads the current one.
  let hot: HotStatements | null = openHot()
  let groupCommit = openGroupCommit()
  const openSingle = () => postgresJs({ connection, max: 1 })
  const renewalListeners: Array<(renewal: PoolRenewal) => void> = []
  /**
   * The hot statements' connections replaced by new ones; the old ones closed after what runs on
   * them, at most `graceSeconds` (0: at once).
   */
  const replaceHot = (graceSeconds: number) => {
    const [oldHot, oldGroupCommit] = [hot, groupCommit]
    hot = openHot()
    groupCommit = openGroupCommit()
    void oldHot?.close(graceSeconds).catch(() => {})
    void oldGroupCommit?.end({ timeout: graceSeconds }).catch(() => {})
    return Boolean(oldHot || oldGroupCommit)
  }
  // A statement refused because the server takes no writes (25006: a standby, a failover whose old
  // primary came back as one): every pool connects again, so that the next statements go to
  // whatever DATABASE_URL's host is now (the new primary once the failover is done), where the old
  // connections would have stayed on the standby until idle for 60 s or 30 minutes old. What runs on
  // the old ones finishes (reads work there). At most once per READ_ONLY_RECONNECT_INTERVAL_MS: a
  // URL that names a standby for good costs a reconnection every 5 s, not one per statement.
  let reconnectedForWritesAt = Number.NEGATIVE_INFINITY
  const reconnectIfReadOnly = (error: unknown) => {
    if (describeDatabaseError(error)?.sqlstate !== READ_ONLY_TRANSACTION) return
    const now = performance.now()
    if (now - reconnectedForWritesAt < READ_ONLY_RECONNECT_INTERVAL_MS) return
    reconnectedForWritesAt = now
    shared.replace(5)
    replaceHot(5)
    for (const listener of renewalListeners) listener({ part: 'read-only' })
  }
  /** A hot statement, its refusal for a server that takes no writes seen by reconnectIfReadOnly. */
  const watchedForWrites = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      reconnectIfReadOnly(error)
      throw error
    }
  }
  // Drizzle's pool, replaced under its client when it lost its server (DATABASE_UNANSWERED_CHECK_MS).
  const shared = new RenewablePool(
    () => postgresJs({ connection, max: pools.postgresJs }),
    openSingle,
    config.databaseUnansweredCheckMs,
    reconnectIfReadOnly,
  )
  shared.onRenewed((renewal) => {
    for (const listener of renewalListeners) listener(renewal)
  })
  const client = shared.client
  const db = drizzlePostgres(client, { schema }) as unknown as Database
  const location = describeTarget(target)
  return {
    engine: 'postgres',
    db,
    location,
    queryConcurrency: pools.bunSql > 0 ? pools.bunSql : pools.postgresJs,
    pipeline: groupCommit && {
      async query<Row>(text: string, params: unknown[]) {
        // JSON text for a jsonb parameter is bound as text: postgres.js would encode a string bound
        // to a described jsonb parameter as a JSON string.
        return watchedForWrites(
          async () =>
            (await groupCommit!.unsafe(jsonbAsText(text), params as postgres.ParameterOrJSON<never>[], {
              prepare: true,
            })) as unknown as Row[],
        )
      },
    },
    replaceHotConnections() {
      // Closed at once: a vanished host never answers a goodbye, and what still runs on them has
      // been answered already (its caller gave up on it).
      return replaceHot(0)
    },
    onPoolRenewed(listener) {
      renewalListeners.push(listener)
    },
    openSession(name) {
      const applicationName = `${connection.application_name}-${name}`
      const session = new RenewablePool(
        () => postgresJs({ connection: { ...connection, application_name: applicationName }, max: 1 }),
        openSingle,
        config.databaseUnansweredCheckMs,
      )
      session.onRenewed((renewal) => {
        // a session never listens: its renewals are its statements'
        if (renewal.part === 'statements')
          for (const listener of renewalListeners) listener({ ...renewal, session: applicationName })
      })
      return {
        db: drizzlePostgres(session.client, { schema }) as unknown as Database,
        end: () => session.end(5),
      }
    },
    async ping() {
      await Promise.all([client`select 1`, hot?.ping(), groupCommit ? groupCommit`select 1` : null])
    },
    async listen(channel, onMessage, onConnect) {
      await client.listen(channel, onMessage, onConnect)
    },
    async notify(channel, payload) {
      await client.notify(channel, payload)
    },
    async query<Row>(text: string, params: unknown[]) {
      const current = hot
      if (current?.accepts(params)) return watchedForWrites(() => current.query<Row>(text, params))
      return (await client.unsafe(text, params as postgres.ParameterOrJSON<never>[], {
        prepare: true,
      })) as unknown as Row[]
    },
    async close() {
      await Promise.all([shared.end(5), hot?.close(5), groupCommit?.end({ timeout: 5 })])
    },
  }
}

async function openPglite(dataDir: string | undefined): Promise<DatabaseHandle> {
  // Loaded only on the embedded path: the WASM build costs start-up time and memory that a
  // replica on PostgreSQL has no use for.
  const [{ PGlite }, { drizzle: drizzlePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
  ])
  if (dataDir) mkdirSync(dataDir, { recursive: true })
  // One process per data directory: a second one (service or CLI) stops here, before opening it.
  const lock = dataDir ? acquireDataDirLock(dataDir) : null
  const client = dataDir ? new PGlite(dataDir) : new PGlite()
  try {
    await client.waitReady
  } catch (error) {
    lock?.release()
    throw error
  }
  const db = drizzlePglite(client, { schema }) as unknown as Database
  return {
    engine: 'pglite',
    db,
    // One connection: statements run one after another.
    queryConcurrency: 1,
    pipeline: null,
    location: dataDir ? `pglite:${dataDir}` : 'pglite:memory',
    async ping() {
      await client.query('select 1')
    },
    async listen(channel, onMessage, onConnect) {
      await client.listen(channel, onMessage)
      onConnect?.()
    },
    async notify(channel, payload) {
      await client.query('select pg_notify($1, $2)', [channel, payload])
    },
    async query<Row>(text: string, params: unknown[]) {
      return (await client.query<Row>(text, params)).rows
    },
    // One in-process connection: nothing to replace.
    replaceHotConnections: () => false,
    onPoolRenewed() {},
    openSession: () => null,
    async close() {
      try {
        if (!client.closed) await client.close()
      } finally {
        lock?.release()
      }
    },
  }
}
