import type postgres from 'postgres'
import { withTimeout } from '../lib/timeout'

type Sql = postgres.Sql<Record<string, postgres.PostgresType>>

/** What a renewal found: logged by the context (src/context.ts). */
export type PoolRenewal =
  | {
      /** The pool that sends statements. */
      part: 'statements'
      /** The statements unanswered for DATABASE_UNANSWERED_CHECK_MS or longer when the check ran. */
      unansweredStatements: number
      /** Their connections whose backend the server no longer has, or has idle since as long. */
      lostConnections: number
      unansweredAfterMs: number
      /** A connection of its own (DatabaseHandle.openSession): its application_name; absent for the shared pool. */
      session?: string
    }
  | {
      /** The LISTEN connection: its own notification, sent through the pool, did not arrive. */
      part: 'listener'
      /** How long it waited for it after the server had answered the NOTIFY. */
      notHeardWithinMs: number
    }
  | {
      /**
       * A statement was refused because the server takes no writes (25006): every pool connects
       * again (DatabaseHandle, src/db/client.ts).
       */
      part: 'read-only'
    }

/**
 * The channel of the listener's check: each replica's own notifications (a token of its pool's),
 * which the others receive and ignore.
 */
export const LISTENER_CHECK_CHANNEL = 'lead_capture_listener_check'

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
  /**
   * The backend waits for a message of ours: idle (its answer sent), idle in a transaction, or
   * active within a statement whose next message never came (postgres.js describes a statement with
   * Flush, not Sync, before it binds it: the description lost, the backend stays `active`).
   */
  waiting_for_client: boolean | null
  /** Since its state last changed: for an active backend, since the statement began. */
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
 * is gone (another host answers now, or the server restarted) or has waited for a message of ours
 * for as long (idle, idle in a transaction, or within a statement: its answer was sent and never
 * arrived) means the connection lost its server: the pool is replaced, what waited on
 * the old one fails at once (CONNECTION_DESTROYED, a 503) and the next statement goes out on a new
 * connection. A backend still at work (a slow statement, a lock wait) is left to finish: the check
 * never cuts a statement short. A check that cannot connect replaces nothing (a new pool could not
 * connect either). At most one check runs per `unansweredCheckMs`.
 *
 * Every statement is watched: Drizzle's queries, `query`, the pings, and a transaction's (its
 * client from `begin` is watched as the pool's is).
 *
 * The LISTEN connection runs no statement to watch: a listener whose server vanished hears nothing,
 * and the replica's caches (src/modules/sources/source-cache.ts) would keep a disabled source or a
 * replaced key until their entries expire (5 minutes). So, while anything listens, every
 * `unansweredCheckMs` the pool sends a notification of its own on LISTENER_CHECK_CHANNEL; one that
 * the server committed and the listener has not heard after another `unansweredCheckMs` means the
 * listener lost its server: it is replaced by a new one (its own client, so no statement is cut
 * short), which listens to every channel again and calls their onConnect (the caches drop what
 * they hold, as after any reconnection). A NOTIFY the pool cannot send gives no verdict.
 */
export class RenewablePool {
  /** What Drizzle and the database handle are given: forwards to the current pool. */
  readonly client: Sql
  private current: Sql
  /** LISTEN's own client (postgres.js opens one connection for it), replaced when found deaf. */
  private listener: Sql | null = null
  /** This pool's notifications on LISTENER_CHECK_CHANNEL, and the one the listener must hear next. */
  private readonly checkToken = crypto.randomUUID()
  private sentChecks = 0
  private awaitedCheck: string | null = null
  /** Resolves the check in progress when the listener hears its notification. */
  private heard: (() => void) | null = null
  private listenerTimer: ReturnType<typeof setInterval> | null = null
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
    /** A client of one connection: the check's (ended after it), and LISTEN's own. */
    private readonly openSingle: () => Sql,
    /** 0: never checked. */
    private readonly unansweredCheckMs: number,
    /** Called with the error of every statement of the pool that fails. */
    private readonly onFailure: (error: unknown) => void = () => {},
  ) {
    this.current = open()
    this.client = this.watched(() => this.current, { listen: this.listen, begin: this.begin })
    this.timer =
      unansweredCheckMs > 0 ? setInterval(() => void this.check(), Math.max(50, unansweredCheckMs / 2)) : null
    this.timer?.unref?.()
  }

  /**
   * A client that forwards to `target()` and watches every statement it runs (the tagged template
   * and `unsafe`); `overrides` replace other properties. The pool's own client, and each
   * transaction's (Drizzle runs a transaction's statements on the client `begin` gives it).
   */
  private watched(target: () => Sql, overrides: Partial<Record<keyof Sql, unknown>> = {}): Sql {
    const unsafe = (...args: Parameters<Sql['unsafe']>) => this.watch(target().unsafe(...args))
    return new Proxy(function forwarded() {} as unknown as Sql, {
      // the tagged template: sql`select 1`
      apply: (_target, _this, args: unknown[]) =>
        this.watch((target() as unknown as (...a: unknown[]) => PromiseLike<unknown>)(...args)),
      get: (_target, property) => {
        if (property === 'unsafe') return unsafe
        if (Object.hasOwn(overrides, property)) return overrides[property as keyof Sql]
        const current = target()
        const value: unknown = Reflect.get(current, property)
        return typeof value === 'function' ? value.bind(current) : value
      },
    })
  }

  /**
   * `begin` whose transaction client is watched too: a transaction's statement whose server
   * vanished is found like any other, and the pool's replacement ends its connection (the
   * transaction fails with CONNECTION_DESTROYED). Before, the webhook worker's claim, the log
   * roll-up and every other transaction on a lost connection waited until TCP gave up.
   */
  private readonly begin = ((...args: unknown[]) => {
    const body = args.pop() as (transaction: Sql) => unknown
    const current = this.current
    return (current.begin as (...a: unknown[]) => Promise<unknown>)(...args, (transaction: Sql) =>
      body(this.watched(() => transaction)),
    )
  }) as Sql['begin']

  /** Called with every renewal (the context logs it). */
  onRenewed(listener: (renewal: PoolRenewal) => void): void {
    this.renewalListeners.push(listener)
  }

  async end(timeoutSeconds: number): Promise<void> {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    if (this.listenerTimer) clearInterval(this.listenerTimer)
    await Promise.all([
      this.current.end({ timeout: timeoutSeconds }),
      this.listener?.end({ timeout: timeoutSeconds }),
    ])
  }

  /**
   * LISTEN on a client of its own, remembered so that a new listener listens again (its onConnect
   * drops what was cached); the first one starts the listener's check.
   */
  private readonly listen = ((
    channel: string,
    onMessage: (payload: string) => void,
    onConnect?: () => void,
  ) => {
    this.listeners.push({ channel, onMessage, onConnect })
    if (!this.listener) {
      this.listener = this.openListener()
      if (this.unansweredCheckMs > 0) {
        this.listenerTimer = setInterval(() => void this.checkListener(), this.unansweredCheckMs)
        this.listenerTimer.unref?.()
      }
    }
    return this.listener.listen(channel, onMessage, onConnect)
  }) as Sql['listen']

  /** A new LISTEN client, listening to the check's channel (its answers to this pool's checks). */
  private openListener(): Sql {
    const listener = this.openSingle()
    if (this.unansweredCheckMs > 0)
      void listener
        .listen(LISTENER_CHECK_CHANNEL, (payload) => {
          if (payload === this.awaitedCheck) this.heard?.()
        })
        .catch(() => {})
    return listener
  }

  /** Sends this pool's notification, then waits for the listener to hear it (class comment). */
  private async checkListener(): Promise<void> {
    if (this.closed || this.awaitedCheck !== null || !this.listener) return
    this.awaitedCheck = `${this.checkToken}:${++this.sentChecks}`
    // Before the NOTIFY: the notification can arrive before the statement's answer does.
    const heard = new Promise<void>((resolve) => {
      this.heard = resolve
    })
    try {
      try {
        // Through the watched client: a NOTIFY stuck on a lost connection is the pool's check's to find.
        await withTimeout(
          Promise.resolve(this.client`select pg_notify(${LISTENER_CHECK_CHANNEL}, ${this.awaitedCheck})`),
          this.unansweredCheckMs,
        )
      } catch {
        // No answer to the NOTIFY: the pool's own check is for that; no verdict on the listener.
        return
      }
      await withTimeout(heard, this.unansweredCheckMs).catch(() => {
        if (!this.closed) this.renewListener({ part: 'listener', notHeardWithinMs: this.unansweredCheckMs })
      })
    } finally {
      this.awaitedCheck = null
      this.heard = null
    }
  }

  private renewListener(renewal: PoolRenewal): void {
    const old = this.listener
    const next = this.openListener()
    this.listener = next
    for (const { channel, onMessage, onConnect } of this.listeners)
      void next.listen(channel, onMessage, onConnect).catch(() => {})
    // At once: its connection lost its server, and it runs no statement of anyone's.
    void old?.end({ timeout: 0 }).catch(() => {})
    for (const listener of this.renewalListeners) listener(renewal)
  }

  /**
   * Keeps the statement among the unanswered until it settles. Every statement given out here is
   * run (awaited by its caller), never used as a fragment of another, so observing it changes
   * nothing: postgres.js sends a statement on the first `then`, one microtask later, after the
   * caller's `.values()` has set how rows come back.
   */
  private watch<Q extends PromiseLike<unknown>>(query: Q): Q {
    const entry: Unanswered | null =
      this.unansweredCheckMs === 0
        ? null
        : { since: performance.now(), query: query as unknown as Unanswered['query'] }
    if (entry) this.unanswered.add(entry)
    query.then(
      () => {
        if (entry) this.unanswered.delete(entry)
      },
      (error: unknown) => {
        if (entry) this.unanswered.delete(entry)
        this.onFailure(error)
      },
    )
    return query
  }

  /**
   * New connections for what comes next, the old ones ended after what runs on them (at most
   * `graceSeconds`): for a server that answers but takes no writes, whose host name may point at
   * the primary by now (DatabaseHandle, src/db/client.ts).
   */
  replace(graceSeconds: number): void {
    if (this.closed) return
    const old = this.current
    this.current = this.reopened(old)
    void old.end({ timeout: graceSeconds }).catch(() => {})
  }

  /** A new pool with the parsers and serializers Drizzle set on the client it was given (the first pool's). */
  private reopened(old: Sql): Sql {
    const next = this.open()
    Object.assign(next.options.parsers, old.options.parsers)
    Object.assign(next.options.serializers, old.options.serializers)
    return next
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
    const probe = this.openSingle()
    try {
      const rows = await withTimeout(
        probe.unsafe<BackendState[]>(
          `select pid, state, wait_event = 'ClientRead' as waiting_for_client,
               (extract(epoch from clock_timestamp() - state_change) * 1000)::float8 as idle_ms
             from pg_stat_activity where pid = any($1::int[])`,
          [[...pids]],
        ),
        Math.max(this.unansweredCheckMs, 3_000),
      )
      const found = new Map(rows.map((row) => [row.pid, row]))
      const lost = [...pids].filter((pid) => {
        const backend = found.get(pid)
        return !backend || (backend.waiting_for_client && (backend.idle_ms ?? 0) >= this.unansweredCheckMs)
      })
      if (lost.length > 0 && !this.closed)
        this.renew({
          part: 'statements',
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
    this.current = this.reopened(old)
    // At once: a lost connection never answers a goodbye, and what waits on it is answered 503.
    void old.end({ timeout: 0 }).catch(() => {})
    for (const listener of this.renewalListeners) listener(renewal)
  }
}
