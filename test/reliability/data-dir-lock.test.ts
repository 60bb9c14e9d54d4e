import { afterAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/cli'
import type { CliCommand } from '../../src/cli/commands'
import { LOCK_FILE_NAME } from '../../src/db/data-dir-lock'
import { runToEnd } from '../helpers/process'
import { cleanupAll, ROOT, spawnReplica } from './support'

/**
 * Embedded mode: PGlite keeps the database inside one process, so two processes on one DATA_DIR
 * each write their own copy and one of them loses its writes. Whoever opens DATA_DIR first holds
 * it; a second process, the CLI or another service, exits 1 naming the holder's pid and what to do.
 * Runs in both test modes: the processes here always use DATA_DIR, never DATABASE_URL.
 */
const roots: string[] = []
function newDataDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'lc-data-dir-lock-'))
  roots.push(root)
  return join(root, 'data')
}

afterAll(async () => {
  await cleanupAll()
  for (const root of roots) rmSync(root, { recursive: true, force: true })
}, 30_000)

const embedded = (dataDir: string) => ({
  DATA_DIR: dataDir,
  DATABASE_URL: undefined,
  REDIS_URL: undefined,
  SHUTDOWN_DELAY_MS: '0',
})

function cli(dataDir: string, ...argv: string[]) {
  return runToEnd(['bun', 'run', 'src/cli/index.ts', ...argv], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: undefined, REDIS_URL: undefined },
  })
}

function expectNamesHolder(text: string, holderPid: number, dataDir: string) {
  expect(text).toContain(`DATA_DIR ${dataDir} is in use by process ${holderPid}`)
  expect(text).toContain('Stop that process first')
  expect(text).toContain('DATABASE_URL')
}

describe('one process per DATA_DIR', () => {
  test('service first: the CLI exits 1 naming the service pid and writes nothing; after the service stops, its writes persist', async () => {
    const dataDir = newDataDir()
    const service = await spawnReplica({ env: embedded(dataDir) })
    const refused = await cli(
      dataDir,
      'orgs',
      'create',
      '--name',
      'Locked Co',
      '--owner-email',
      'owner@locked.example',
      '--password',
      'correct horse battery',
    )
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe('')
    expectNamesHolder(refused.stderr, service.process.pid, dataDir)

    expect(await service.stop()).toBe(0)
    expect(existsSync(join(dataDir, LOCK_FILE_NAME))).toBe(false)

    const created = await cli(
      dataDir,
      'orgs',
      'create',
      '--name',
      'Unlocked Co',
      '--owner-email',
      'owner@unlocked.example',
      '--password',
      'correct horse battery',
    )
    expect(created.stderr).toBe('')
    expect(created.code).toBe(0)
    // The write persisted: the restarted service signs the owner in.
    const restarted = await spawnReplica({ env: embedded(dataDir) })
    const login = await fetch(`${restarted.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'owner@unlocked.example', password: 'correct horse battery' }),
    })
    expect(login.status).toBe(200)
    expect(await restarted.stop()).toBe(0)
  }, 90_000)

  test('CLI first: a service started while the CLI holds DATA_DIR exits 1 naming the CLI pid', async () => {
    const dataDir = newDataDir()
    let release!: () => void
    let holding!: () => void
    const held = new Promise<void>((resolve) => {
      holding = resolve
    })
    // The CLI's own code path (config → context → PGlite → lock), with a command that waits.
    const waitCommand: CliCommand = {
      name: 'wait',
      usage: 'usage: wait',
      description: 'holds the database until released',
      run: async () => {
        holding()
        await new Promise<void>((resolve) => {
          release = resolve
        })
        return 0
      },
    }
    const output: string[] = []
    const running = runCli(['wait'], {
      commands: [waitCommand],
      environment: { DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      io: { stdout: (text) => output.push(text), stderr: (text) => output.push(text) },
    })
    await held
    const service = await spawnReplica({ env: embedded(dataDir), waitReady: false })
    expect(await service.process.exited).toBe(1)
    expectNamesHolder(service.output(), process.pid, dataDir)
    release()
    expect(await running).toBe(0)
    expect(output).toEqual([])
    expect(existsSync(join(dataDir, LOCK_FILE_NAME))).toBe(false)
    // Once the CLI is done, the service starts.
    const started = await spawnReplica({ env: embedded(dataDir) })
    expect(await started.stop()).toBe(0)
  }, 90_000)

  test('a second service exits 1 naming the first', async () => {
    const dataDir = newDataDir()
    const first = await spawnReplica({ env: embedded(dataDir) })
    const second = await spawnReplica({ env: embedded(dataDir), waitReady: false })
    expect(await second.process.exited).toBe(1)
    expectNamesHolder(second.output(), first.process.pid, dataDir)
    // The first is unaffected.
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200)
    expect(await first.stop()).toBe(0)
  }, 90_000)

  test('a stale lock never blocks: a killed holder, a reused pid, an unreadable file', async () => {
    const dataDir = newDataDir()
    const killed = await spawnReplica({ env: embedded(dataDir) })
    await killed.kill()
    const lockPath = join(dataDir, LOCK_FILE_NAME)
    expect(JSON.parse(readFileSync(lockPath, 'utf8')).pid).toBe(killed.process.pid)
    const afterKill = await spawnReplica({ env: embedded(dataDir) })
    expect(await afterKill.stop()).toBe(0)

    // The recorded pid is alive (this test process) but started at another time: pid reuse.
    writeFileSync(lockPath, JSON.stringify({ pid: process.pid, started: '1' }))
    const afterReuse = await spawnReplica({ env: embedded(dataDir) })
    expect(await afterReuse.stop()).toBe(0)

    // A holder that crashed between creating and writing the file.
    writeFileSync(lockPath, '')
    const afterEmpty = await spawnReplica({ env: embedded(dataDir) })
    expect(await afterEmpty.stop()).toBe(0)
  }, 120_000)
})
