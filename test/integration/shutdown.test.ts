import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config'
import { createContext } from '../../src/context'
import { runMigrations } from '../../src/db/migrate'
import { createMemoryLogger } from '../../src/lib/logger'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSource } from '../helpers/factories'

const ROOT = join(import.meta.dir, '../..')
const dataDir = join(tmpdir(), `lead-capture-shutdown-${crypto.randomUUID()}`)
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

async function freePort(): Promise<number> {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = server.port!
  server.stop(true)
  return port
}

/**
 * A real process: SIGTERM while a request is still sending its body. Readiness must turn 503, the
 * in-flight request must complete with 200, and the process must exit 0.
 */
describe('graceful shutdown', () => {
  test('SIGTERM drains: readiness 503, the in-flight request finishes, exit 0', async () => {
    // No pre-stop delay here: this test is about draining; the delay has its own test below.
    const { child, base, apiKey } = await startSeededService(dataDir, {
      SHUTDOWN_TIMEOUT_MS: '10000',
      SHUTDOWN_DELAY_MS: '0',
    })
    try {
      // A request whose body arrives slowly: it is in flight when SIGTERM comes.
      const encoder = new TextEncoder()
      let sendRest: (() => void) | undefined
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          const address = uniqueEmail('drain')
          controller.enqueue(encoder.encode(`{"email":"${address.slice(0, 5)}`))
          sendRest = () => {
            controller.enqueue(encoder.encode(`${address.slice(5)}"}`))
            controller.close()
          }
        },
      })
      const inFlight = fetch(`${base}/api/webhook/lead/${apiKey}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit)
      await Bun.sleep(200)
      child.kill('SIGTERM')
      await Bun.sleep(100)
      // (Readiness turning 503 while draining is asserted in-process in foundation.test.ts: here
      // the listener has already stopped taking new connections.)
      sendRest!()
      const response = await inFlight
      expect(response.status).toBe(200)
      expect((await response.json()).status).toBe('created')
      expect(await child.exited).toBe(0)
      const logs = await new Response(child.stdout).text()
      const draining = logs.indexOf('shutdown: draining in-flight requests')
      expect(draining).toBeGreaterThan(-1)
      expect(logs.indexOf('shutdown: done')).toBeGreaterThan(draining)
    } finally {
      child.kill('SIGKILL')
    }
  }, 60_000)

  test('SIGTERM with SHUTDOWN_DELAY_MS: /readyz 503 at once (any request-line form), everything else served until the delay ends, then the port closes and the process exits 0', async () => {
    const delayMs = 2000
    const { child, base, port, apiKey } = await startSeededService(`${dataDir}-delay`, {
      SHUTDOWN_DELAY_MS: String(delayMs),
    })
    try {
      const signalledAt = performance.now()
      child.kill('SIGTERM')
      await Bun.sleep(100)
      // The balancer's check (HTTP/1.0, relative, no Host) and an ordinary one both see 503.
      const probe = await rawGet(port, 'GET /readyz HTTP/1.0\r\n\r\n')
      expect(probe).toStartWith('HTTP/1.1 503')
      expect(probe).toContain('"draining":true')
      const readiness = await fetch(`${base}/readyz`)
      expect(readiness.status).toBe(503)
      expect(await readiness.json()).toMatchObject({ status: 'not_ready', draining: true })
      // Everything else is still served, on new connections, until the delay ends.
      const served: number[] = []
      while (performance.now() - signalledAt < delayMs - 400) {
        const lead = await fetch(`${base}/api/webhook/lead/${apiKey}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', connection: 'close' },
          body: JSON.stringify({ email: uniqueEmail('delay') }),
        })
        served.push(lead.status)
        expect((await lead.json()).status).toBe('created')
        served.push((await fetch(`${base}/healthz`, { headers: { connection: 'close' } })).status)
        await Bun.sleep(100)
      }
      expect(served.length).toBeGreaterThan(4)
      expect(served.every((status) => status === 200)).toBe(true)
      expect(await child.exited).toBe(0)
      expect(performance.now() - signalledAt).toBeGreaterThanOrEqual(delayMs)
      // And the port is closed.
      expect(
        await fetch(`${base}/healthz`).then(
          () => 'answered',
          () => 'refused',
        ),
      ).toBe('refused')
      const logs = await new Response(child.stdout).text()
      expect(logs).toContain('shutdown: readiness 503, still serving')
      expect(logs.indexOf('shutdown: done')).toBeGreaterThan(
        logs.indexOf('shutdown: draining in-flight requests'),
      )
    } finally {
      child.kill('SIGKILL')
      rmSync(`${dataDir}-delay`, { recursive: true, force: true })
    }
  }, 60_000)
})

/**
 * The service as a real process on a free port, on its own embedded database in `directory` (or on
 * DATABASE_URL when set), without Redis, with one source seeded from this process first; returned
 * once /readyz answers 200.
 */
async function startSeededService(directory: string, extraEnv: Record<string, string>) {
  const port = await freePort()
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    DATA_DIR: directory,
    ...extraEnv,
  }
  if (process.env.DATABASE_URL) env.DATABASE_URL = process.env.DATABASE_URL
  const config = loadConfig(env)
  const seed = await createContext(config, { logger: createMemoryLogger('silent') })
  await runMigrations(config, seed.database, seed.logger)
  const organization = await createOrganization(seed)
  const { apiKey } = await createSource(seed, organization.id)
  await seed.close()

  const child = Bun.spawn(['bun', 'run', 'src/index.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env, REDIS_URL: '' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 20_000
  for (;;) {
    const ready = await fetch(`${base}/readyz`).catch(() => null)
    if (ready?.status === 200) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error('service did not become ready')
    }
    await Bun.sleep(50)
  }
  return { child, base, port, apiKey }
}

/** One request on a new socket, the whole response as text. */
function rawGet(port: number, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const socket = connect(port, '127.0.0.1', () => socket.write(head))
    socket.setTimeout(5000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
  })
}
