import { createApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createContext } from '../src/context'
import { createMemoryLogger } from '../src/lib/logger'

/**
 * Prints the published OpenAPI document (what GET /swagger/json answers) as JSON, for the linters
 * and the client generator. Built on an in-memory PGlite and the in-process limiter: nothing is
 * queried, and the output does not depend on the machine's DATABASE_URL or REDIS_URL.
 */
const config = loadConfig({
  PUBLIC_BASE_URL: process.env.PUBLIC_BASE_URL ?? 'https://leads.example.com',
  LOG_LEVEL: 'silent',
})
const ctx = await createContext(config, { inMemoryDatabase: true, logger: createMemoryLogger('silent') })
const response = await createApp(ctx).handle(new Request('http://localhost/swagger/json'))
if (response.status !== 200) throw new Error(`GET /swagger/json answered ${response.status}`)
process.stdout.write(`${JSON.stringify(await response.json(), null, 2)}\n`)
await ctx.close()
