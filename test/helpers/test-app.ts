import { createApp } from '../../src/app'
import { type Config, loadConfig } from '../../src/config'
import { type AppContext, type ContextOverrides, createContext } from '../../src/context'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { runMigrations } from '../../src/db/migrate'
import { createMemoryLogger, type LogFields } from '../../src/lib/logger'
import { MemoryRateLimiter } from '../../src/lib/rate-limit'
import { buildServices, type ServiceParts } from '../../src/services'
import { contractOf } from './contract'
import { createSignedInUser } from './factories'

/**
 * Tests run on real PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set, on an in-memory
 * PGlite and the in-process limiter otherwise. The database is opened and migrated once per test
 * process and shared: every test makes its own organization, so tests never see each other's rows.
 */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: process.env.REDIS_URL,
    // The client switches (docs/benchmarks.md): the suite runs with each of them on and off.
    DATABASE_DRIVER: process.env.DATABASE_DRIVER,
    REDIS_DRIVER: process.env.REDIS_DRIVER,
    LOG_LEVEL: 'silent',
    PUBLIC_BASE_URL: 'http://lead-capture.test',
    // app.handle has no socket: the peer counts as loopback, so tests can set X-Forwarded-For.
    TRUST_PROXY: '127.0.0.1/32,::1/128',
    DATABASE_POOL_SIZE: '4',
    // A fixed test key, so tests never write one into DATA_DIR; receivers listen on loopback.
    WEBHOOK_SECRETS_KEY: 'dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI=',
    OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'true',
    ...overrides,
  })
}

let sharedDatabase: Promise<DatabaseHandle> | undefined

export function testDatabase(): Promise<DatabaseHandle> {
  sharedDatabase ??= (async () => {
    const config = testConfig()
    const handle = await openDatabase(config, { inMemory: true })
    await runMigrations(config, handle, createMemoryLogger('silent'))
    return handle
  })()
  return sharedDatabase
}

export interface TestAppOptions extends Omit<ContextOverrides, 'database'> {
  env?: Record<string, string>
  /**
   * A database opened by the test itself (its own settings, such as a lock timeout), on the
   * database the suite migrated; the shared handle otherwise. The test closes it.
   */
  database?: DatabaseHandle
  /**
   * Check every response against the OpenAPI document (test/helpers/contract.ts); on by default.
   * Off only where a test provokes what no client can be promised (a failing database's 500).
   */
  contract?: boolean
  /** Parts of the services built from the test's context instead of the defaults (ServiceParts). */
  parts?: (ctx: AppContext) => ServiceParts
}

/** The lines each test context's memory logger kept (loggedLines). */
const memoryLogs = new WeakMap<AppContext, LogFields[]>()

export async function makeTestContext(options: TestAppOptions = {}): Promise<AppContext> {
  const { env, contract: _contract, parts: _parts, database: ownDatabase, ...overrides } = options
  const config = testConfig(env)
  // the suite's database is migrated before a handle of the test's own is used
  const database = await testDatabase().then((shared) => ownDatabase ?? shared)
  const logger = createMemoryLogger('debug')
  const ctx = await createContext(config, {
    logger,
    rateLimitKeyPrefix: `rl:test:${crypto.randomUUID()}:`,
    ...overrides,
    database,
  })
  if (ctx.logger === logger) memoryLogs.set(ctx, logger.lines)
  return ctx
}

/** What a test context logged so far, one object per line (what stdout would have received). */
export function loggedLines(ctx: AppContext): LogFields[] {
  const lines = memoryLogs.get(ctx)
  if (!lines)
    throw new Error('loggedLines: this context was not made by makeTestContext with its memory logger')
  return lines
}

/**
 * The access lines (`msg: 'request'`) a test context logged, once there are `count` of them: Elysia's
 * onAfterResponse writes each after its response is handed over, so a test that reads them right
 * after `app.handle` can be early (a fixed 5 ms sleep was, once, in CI). Gives up after `timeoutMs`
 * and returns what there is, for the test's own assertion to report.
 */
export async function accessLinesOf(ctx: AppContext, count: number, timeoutMs = 2_000): Promise<LogFields[]> {
  const access = () => loggedLines(ctx).filter((line) => line.msg === 'request')
  const deadline = performance.now() + timeoutMs
  while (access().length < count && performance.now() < deadline) await Bun.sleep(2)
  return access()
}

/**
 * A context, its services and the app built on them: a test that calls a service or runs a job
 * directly uses `services`, the same instances the app's routes use (one source cache, one
 * delivery signal, one set of write-behind buffers per app).
 */
export async function makeTestApp(options: TestAppOptions = {}) {
  const ctx = await makeTestContext(options)
  const services = buildServices(ctx, options.parts?.(ctx))
  const app = createApp(ctx, { services })
  if (options.contract !== false) checkResponsesAgainstDocument(app)
  return { ctx, services, app }
}

/** Wraps `app.handle` so each response is checked against the document before the test sees it. */
function checkResponsesAgainstDocument(app: ReturnType<typeof createApp>): void {
  const handle = app.handle.bind(app)
  // Fetched from an app of its own, so the request counts against no test's rate-limit bucket.
  const contract = contractOf(async () => {
    const ctx = await makeTestContext({ limiter: new MemoryRateLimiter() })
    return createApp(ctx).handle(new Request('http://localhost/swagger/json'))
  })
  app.handle = async (request: Request) => {
    const response = await handle(request)
    await (await contract).check(request, response)
    return response
  }
}

export const usingRealServices = Boolean(process.env.DATABASE_URL)

type TestApp = Awaited<ReturnType<typeof makeTestApp>>['app']

/** An app and the signed-in owner of a new organization: the start of every management API test. */
export async function makeSignedInApp(options: TestAppOptions = {}) {
  const { app, ctx, services } = await makeTestApp(options)
  const { organization, user, token } = await createSignedInUser(ctx)
  return { app, ctx, services, organization, user, token }
}

/** One management API call as the holder of `token` (none: anonymous). */
export function call(app: TestApp, token: string | undefined, method: string, path: string, json?: unknown) {
  return app.handle(request(method, path, { token, json }))
}

/** Builds a Request against the app; `json` sets the body and content type. */
export function request(
  method: string,
  path: string,
  options: { json?: unknown; body?: BodyInit; headers?: Record<string, string>; token?: string } = {},
): Request {
  const headers: Record<string, string> = { ...options.headers }
  let body = options.body
  if (options.json !== undefined) {
    body = JSON.stringify(options.json)
    headers['content-type'] ??= 'application/json'
  }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  return new Request(`http://localhost${path}`, { method, headers, body })
}
