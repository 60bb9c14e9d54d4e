import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, ROOT, waitForReady } from '../reliability/support'

/**
 * The README's Quick start, run word for word: its fenced blocks are read from README.md (those
 * after a `<!-- quickstart: service -->` or `<!-- quickstart: client -->` marker), so the README and
 * this test cannot drift apart. The service block runs as written in a process group of its own on
 * the embedded defaults (no DATABASE_URL or REDIS_URL, whatever mode the suite runs in) with
 * DATA_DIR in a new temporary directory and PORT on a free loopback port; the client blocks run in
 * one bash session, in order. The only change to the text: `localhost:3000` becomes that port.
 */

const README = join(ROOT, 'README.md')
const QUICKSTART_PORT_TEXT = 'localhost:3000'
const STEP_MARKER = '@@quickstart-step@@'
const SUITE_ONLY_VARIABLES = new Set(['DATABASE_URL', 'REDIS_URL', 'NODE_ENV'])

function quickstartBlocks(markdown: string, kind: 'service' | 'client'): string[] {
  const pattern = new RegExp(`<!-- quickstart: ${kind} -->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``, 'g')
  return [...markdown.matchAll(pattern)].map((match) => match[1]!)
}

/** Shell commands of a block: continuation lines (`\`) joined, comments and blank lines left out. */
function commandsOf(block: string): string[] {
  const commands: string[] = []
  let current = ''
  for (const line of block.split('\n')) {
    if (current === '' && (line.trim() === '' || line.trimStart().startsWith('#'))) continue
    current += `${line}\n`
    if (!line.endsWith('\\')) {
      commands.push(current.trimEnd())
      current = ''
    }
  }
  if (current) commands.push(current.trimEnd())
  return commands
}

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

describe('README Quick start', () => {
  test('the marked blocks are there: the service, then the steps sign-up to health', () => {
    const markdown = readFileSync(README, 'utf8')
    expect(quickstartBlocks(markdown, 'service')).toHaveLength(1)
    const client = quickstartBlocks(markdown, 'client').flatMap(commandsOf).join('\n')
    for (const path of [
      '/api/auth/signup',
      '/api/webhook/sources',
      '/api/v2/leads',
      '/api/webhook/tracker.js',
      '/health',
    ]) {
      expect(client).toContain(path)
    }
  })

  test('followed word for word on the embedded defaults, it ends with the lead listed by GET /api/v2/leads', async () => {
    const markdown = readFileSync(README, 'utf8')
    const port = freePort()
    const address = `localhost:${port}`
    const dataDir = mkdtempSync(join(tmpdir(), 'lead-capture-quickstart-'))
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))

    // A user's shell: none of the suite's own settings (its database, its Redis, bun test's NODE_ENV).
    const env: Record<string, string> = {}
    for (const [name, value] of Object.entries(process.env)) {
      if (value !== undefined && !SUITE_ONLY_VARIABLES.has(name)) env[name] = value
    }
    Object.assign(env, {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      // The test stops the service at once; the pre-stop delay is for load balancers.
      SHUTDOWN_DELAY_MS: '0',
    })

    const [serviceBlock] = quickstartBlocks(markdown, 'service')
    const service = Bun.spawn(['bash', '-euo', 'pipefail', '-c', serviceBlock!], {
      cwd: ROOT,
      env,
      stdout: 'pipe',
      stderr: 'pipe',
      // Its own process group: `bun run start` starts children that a signal to bash would not reach.
      detached: true,
    })
    const serviceOutput = new Response(service.stderr).text()
    void new Response(service.stdout).text()
    // The data directory goes only once the service has exited: it writes there while it stops.
    cleanups.push(async () => {
      try {
        process.kill(-service.pid, 'SIGTERM')
      } catch {
        // already gone
      }
      await Promise.race([service.exited, Bun.sleep(15_000)])
    })
    try {
      await waitForReady(`http://127.0.0.1:${port}`, 60_000, service)
    } catch (error) {
      process.kill(-service.pid, 'SIGKILL')
      throw new Error(`${(error as Error).message}\n--- service stderr ---\n${await serviceOutput}`)
    }

    const commands = quickstartBlocks(markdown, 'client')
      .flatMap(commandsOf)
      .map((command) => command.replaceAll(QUICKSTART_PORT_TEXT, address))
    const script = commands.map((command) => `${command}\nprintf '\\n%s\\n' '${STEP_MARKER}'`).join('\n')
    const client = Bun.spawnSync(['bash', '-euo', 'pipefail', '-c', script], { cwd: ROOT, env })
    const stdout = client.stdout.toString()
    expect({ exitCode: client.exitCode, stderr: client.stderr.toString(), stdout }).toMatchObject({
      exitCode: 0,
    })
    const outputs = stdout.split(`\n${STEP_MARKER}\n`).map((part) => part.trim())
    expect(outputs).toHaveLength(commands.length + 1)
    const outputOf = (fragment: string) => {
      const index = commands.findIndex((command) => command.includes(fragment))
      expect({ fragment, found: index >= 0 }).toEqual({ fragment, found: true })
      return outputs[index]!
    }

    // The webhook URL the source step prints.
    const webhookUrl = outputOf('echo "$WEBHOOK_URL"')
    expect(webhookUrl).toMatch(new RegExp(`^http://${address}/api/webhook/lead/flwh_[A-Za-z0-9_-]+$`))

    // The lead sent to it.
    const sent = JSON.parse(outputOf('-X POST "$WEBHOOK_URL"'))
    expect(sent).toEqual({ status: 'created', success: true, lead_id: expect.any(String) })

    // Listed by GET /api/v2/leads, with what was sent.
    const listed = JSON.parse(outputOf('/api/v2/leads'))
    expect(listed).toMatchObject({
      data: [{ lead_id: sent.lead_id, email: 'ada@example.com', first_name: 'Ada', last_name: 'Lovelace' }],
      next_cursor: null,
    })

    // The tracker tag points at the served script and at this source.
    const tag = outputOf('/api/webhook/tracker.js')
    const scriptSrc = tag.match(/src="([^"]+)"/)?.[1]
    expect(tag).toContain(`data-webhook-url="${webhookUrl}"`)
    expect(scriptSrc).toBe(`http://${address}/api/webhook/tracker.js`)
    const trackerResponse = await fetch(scriptSrc!.replace('localhost', '127.0.0.1'))
    expect(trackerResponse.status).toBe(200)
    expect(trackerResponse.headers.get('content-type')).toBe('application/javascript; charset=utf-8')
    expect(await trackerResponse.text()).toContain('LeadCapture')

    // The source's health counts the lead.
    const health = JSON.parse(outputOf('/health'))
    expect(health).toMatchObject({ status: 'healthy', totals: { created: 1 } })

    process.kill(-service.pid, 'SIGTERM')
    await service.exited
  }, 180_000)
})
