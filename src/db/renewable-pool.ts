import type postgres from 'postgres'
import { withTimeout } from '../lib/timeout'

type Sql = postgres.Sql<Record<string, postgres.PostgresType>>

/** What a renewal found: logged by the context (src/context.ts). */
export interface PoolRenewal {
  /** The statements unanswered for DATABASE_UNANSWERED_CHECK_MS or longer when the check ran. */
  unansweredStatements: number
  /** Their connections whose backend the server no longer has, or has idle since as long. */
  lostConnections: number
  unansweredAfterMs: number
}

/** A statement sent through the pool and not answered yet; `state` is postgres.js' backend key. */
interface Unanswered {
  since: number
  query: { state?: { pid: number | null } }
}

interface Listener {
  channel: string
  onMessage: (payload: string) => void
  onConnect?: () => void
}

/** One row of the check's look at pg_stat_activity. */
interface BackendState {
  pid: number
  state: string | null
  idle_ms: number | null
}

/**
 * postgres.js' shared pool (Drizzle's, and the hot statements' with DATABASE_DRIVER=postgres-js)
 * behind a client that stays the same while the pool under it can be replaced.
 *
 * Why: a database host that vanishes without closing its connections (a crashed machine, a failover
 * behind a proxy or NAT that keeps the sockets open) answers nothing, and a statement sent on such
 * a connection waits until TCP gives up (~15 minutes, for ever when something in between keeps
 * acknowledging); postgres.js then queues further statements behind its busy connections. Drizzle
 * keeps the client it was given (its prepared queries too), so replacing the pool means replacing
 * what that client forwards to.
 *
 * When: a statement unanswered for `unansweredCheckMs` makes the pool ask the server, on a new
 * connection of its own, what the statement's backend is doing (pg_stat_activity). A backend that
 * is gone (another host answers now, or the server restarted) or idle for as long (its answer was
 * sent and never arrived) means the connection lost its server: the pool is replaced, what waited on
 * the old one fails at once (CONNECTION_DESTROYED, a 503) and the next statement goes out on a new
 * connection. A backend still at work (a slow statement, a lock wait) is left to finish: the check
 * never cuts a statement short. A check that cannot connect replaces nothing (a new pool could not
 * connect either). At most one check runs per `unansweredCheckMs`.
 *
 * Only statements sent outside a transaction are watched (Drizzle's queries, `query`, the pings); a
 * transaction on a lost connection fails when the pool is replaced for any of them.
 */
export class RenewablePool {
  /** What Drizzle and the database handle are given: forwards to the current pool. */
  readonly client: Sql
  private current: Sql
  /** In the order sent, so the oldest come first. */
  private readonly unanswered = new Set<Unanswered>()
  private readonly listeners: Listener[] = []
  private readonly renewalListeners: Array<(renewal: PoolRenewal) => void> = []
  private readonly timer: ReturnType<typeof setInterval> | null
  private checking = false
  private lastCheckAt = Number.NEGATIVE_INFINITY
  private closed = false

  constructor(
    private readonly open: () => Sql,
    /** A client of one connection for the check, ended after it. */
    private readonly openProbe: () => Sql,
    /** 0: never checked. */
    private readonly unansweredCheckMs: number,
  ) {
    this.current = open()
    const unsafe = (...args: Parameters<Sql['unsafe']>) => this.watch(this.current.unsafe(...args))
    this.client = new Proxy(function forwarded() {} as unknown as Sql, {
      // the tagged template: sql`select 1`
      apply: (_target, _this, args: unknown[]) =>
        this.watch((this.current as unknown as (...a: unknown[]) => PromiseLike<unknown>)(...args)),
      get: (_target, property) => {
        if (property === 'unsafe') return unsafe
        if (property === 'listen') return this.listen
        const value: unknown = Reflect.get(this.current, property)
        return typeof value === 'function' ? value.bind(this.current) : value
      },
    })
    this.timer =
      unansweredCheckMs > 0 ? setInterval(() => void this.check(), Math.max(50, unansweredCheckMs / 2)) : null
    this.timer?.unref?.()
  }

  /** Called with every renewal (the context logs it). */
  onRenewed(listener: (renewal: PoolRenewal) => void): void {
    this.renewalListeners.push(listener)
  }

  async end(timeoutSeconds: number): Promise<void> {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    await this.current.end({ timeout: timeoutSeconds })
  }

  /** LISTEN, remembered so that a new pool listens again (its onConnect drops what was cached). */
  private readonly listen = ((
    channel: string,
    onMessage: (payload: string) => void,
    onConnect?: () => void,
  ) => {
    this.listeners.push({ channel, onMessage, onConnect })
    return this.current.listen(channel, onMessage, onConnect)
  }) as Sql['listen']

  /**
   * Keeps the statement among the unanswered until it settles. Every statement given out here is
   * run (awaited by its caller), never used as a fragment of another, so observing it changes
   * nothing: postgres.js sends a statement on the first `then`, one microtask later, after the
   * caller's `.values()` has set how rows come back.
   */
  private watch<Q extends PromiseLike<unknown>>(query: Q): Q {
    if (this.unansweredCheckMs === 0) return query
    const entry: Unanswered = { since: performance.now(), query: query as unknown as Unanswered['query'] }
    this.unanswered.add(entry)
    const settle = () => this.unanswered.delete(entry)
    query.then(settle, settle)
    return query
  }

  private async check(): Promise<void> {
    const now = performance.now()
    if (this.checking || this.closed || now - this.lastCheckAt < this.unansweredCheckMs) return
    const pids = new Set<number>()
    let waiting = 0
    for (const entry of this.unanswered) {
      if (now - entry.since < this.unansweredCheckMs) break
      waiting++
      const pid = entry.query.state?.pid
      // null or absent: still in postgres.js' queue or connecting, not on a server yet
      if (typeof pid === 'number') pids.add(pid)
    }
    if (pids.size === 0) return
    this.checking = true
    this.lastCheckAt = now
    const probe = this.openProbe()
    try {
      const rows = await withTimeout(
        probe.unsafe<BackendState[]>(
          `select pid, state, (extract(epoch from clock_timestamp() - state_change) * 1000)::float8 as idle_ms
             from pg_stat_activity where pid = any($1::int[])`,
          [[...pids]],
        ),
        Math.max(this.unansweredCheckMs, 3_000),
      )
      const found = new Map(rows.map((row) => [row.pid, row]))
      const lost = [...pids].filter((pid) => {
        const backend = found.get(pid)
        return !backend || (backend.state === 'idle' && (backend.idle_ms ?? 0) >= this.unansweredCheckMs)
      })
      if (lost.length > 0 && !this.closed)
        this.renew({
          unansweredStatements: waiting,
          lostConnections: lost.length,
          unansweredAfterMs: this.unansweredCheckMs,
        })
    } catch {
      // No server to ask (the host is down, not replaced): a new pool could not connect either.
    } finally {
      this.checking = false
      void probe.end({ timeout: 0 }).catch(() => {})
    }
  }

  private renew(renewal: PoolRenewal): void {
    const old = this.current
    const next = this.open()
    // Drizzle set its parsers and serializers on the client it was given (the first pool's).
    Object.assign(next.options.parsers, old.options.parsers)
    Object.assign(next.options.serializers, old.options.serializers)
    this.current = next
    for (const { channel, onMessage, onConnect } of this.listeners)
      void next.listen(channel, onMessage, onConnect).catch(() => {})
    // At once: a lost connection never answers a goodbye, and what waits on it is answered 503.
    void old.end({ timeout: 0 }).catch(() => {})
    for (const listener of this.renewalListeners) listener(renewal)
  }
}
