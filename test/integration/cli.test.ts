import { beforeAll, describe, expect, test } from 'bun:test'
import { fileURLToPath } from 'node:url'
import { type CommandIo, commands } from '../../src/cli/commands'
import { runCli } from '../../src/cli/index'
import type { AppContext } from '../../src/context'
import { expectError } from '../helpers/common-route-tests'
import { createOrganization, createSignedInUser } from '../helpers/factories'
import { runToEnd } from '../helpers/process'
import { makeTestApp, request, testDatabase, usingRealServices } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

const PASSWORD = 'a long enough password'
const CLI_ENTRY = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url))

function captureIo(): CommandIo & { out: string; err: string } {
  const io = {
    out: '',
    err: '',
    stdout: (text: string) => {
      io.out += text
    },
    stderr: (text: string) => {
      io.err += text
    },
  }
  return io
}

async function cli(ctx: AppContext, ...argv: string[]) {
  const io = captureIo()
  const code = await runCli(argv, { ctx, io })
  return { code, stdout: io.out, stderr: io.err }
}

function uniqueEmail() {
  return `cli-${Bun.randomUUIDv7()}@example.com`
}

describe('cli in process', () => {
  test('orgs create prints the ids; the owner can log in', async () => {
    const { app, ctx } = await makeTestApp()
    const email = uniqueEmail()
    const result = await cli(
      ctx,
      'orgs',
      'create',
      '--name',
      'Acme',
      '--owner-email',
      email,
      '--password',
      PASSWORD,
    )
    expect(result).toMatchObject({ code: 0, stderr: '' })
    const printed = JSON.parse(result.stdout)
    expect(printed).toEqual({
      organization_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      user_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      plan: 'pro',
    })
    const login = await app.handle(
      request('POST', '/api/auth/login', { json: { email, password: PASSWORD } }),
    )
    expect(login.status).toBe(200)
    expect((await login.json()).user).toMatchObject({
      id: printed.user_id,
      role: 'owner',
      organization_id: printed.organization_id,
    })
  })

  test('orgs set-plan free takes integrations away at the next request; pro gives them back', async () => {
    const { app, ctx } = await makeTestApp()
    const { organization, token } = await createSignedInUser(ctx)
    // Creating a source is plan-gated; your own tokens and keys are not (own-credentials.test.ts).
    const createSourceCall = () =>
      app.handle(request('POST', '/api/webhook/sources', { token, json: { name: 'x' } }))
    expect((await createSourceCall()).status).toBe(201)
    const result = await cli(ctx, 'orgs', 'set-plan', organization.id, 'free')
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({
      organization_id: organization.id,
      plan: 'free',
      features: [],
    })
    const body = await expectError(await createSourceCall(), 403, 'plan_feature_required')
    expect(body).toMatchObject({ required_feature: 'integrations', plan: 'free' })
    await expectError(
      await app.handle(request('POST', '/api/pat', { token, json: { name: 'x' } })),
      403,
      'plan_feature_required',
    )
    expect((await cli(ctx, 'orgs', 'set-plan', organization.id, 'enterprise')).code).toBe(0)
    expect((await createSourceCall()).status).toBe(201)
    expect((await app.handle(request('GET', '/api/pat', { token }))).status).toBe(200)
  })

  test('users create adds a user with the role; a taken e-mail is exit 1', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const email = uniqueEmail()
    const args = ['users', 'create', '--org', organization.id, '--email', email, '--password', PASSWORD]
    const result = await cli(ctx, ...args, '--role', 'viewer')
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({
      organization_id: organization.id,
      email,
      role: 'viewer',
    })
    const login = await (
      await app.handle(request('POST', '/api/auth/login', { json: { email, password: PASSWORD } }))
    ).json()
    const me = await (await app.handle(request('GET', '/api/auth/me', { token: login.token }))).json()
    expect(me.permissions).toEqual(['leads.read'])
    const again = await cli(ctx, ...args, '--role', 'admin')
    expect(again).toEqual({ code: 1, stdout: '', stderr: expect.stringContaining('email_taken') })
  })

  test('an unknown organization is exit 1 with a clear message', async () => {
    const { ctx } = await makeTestApp()
    const missing = Bun.randomUUIDv7()
    const setPlan = await cli(ctx, 'orgs', 'set-plan', missing, 'pro')
    expect(setPlan).toEqual({ code: 1, stdout: '', stderr: 'error: organization not found (not_found)\n' })
    const user = await cli(
      ctx,
      ...[
        'users',
        'create',
        '--org',
        missing,
        '--email',
        uniqueEmail(),
        '--password',
        PASSWORD,
        '--role',
        'member',
      ],
    )
    expect(user.code).toBe(1)
  })

  test('usage errors are exit 2 with every problem and the usage on stderr', async () => {
    const { ctx } = await makeTestApp()
    const cases: Array<[string[], string[]]> = [
      [
        ['orgs', 'create', '--name', 'A', '--owner-email', 'nope', '--password', 'short'],
        ['--owner-email', '--password'],
      ],
      [
        [
          'orgs',
          'create',
          '--name',
          'A',
          '--owner-email',
          uniqueEmail(),
          '--password',
          PASSWORD,
          '--plan',
          'gold',
        ],
        ['--plan'],
      ],
      [['orgs', 'create', '--bogus', 'x'], ['--bogus']],
      [['orgs', 'set-plan', Bun.randomUUIDv7(), 'gold'], ['plan must be one of free, pro, enterprise']],
      [['orgs', 'set-plan', 'not-an-id', 'pro'], ['not an organization id']],
      [['orgs', 'set-plan', Bun.randomUUIDv7()], ['expected 2 arguments']],
      [
        [
          'users',
          'create',
          '--org',
          Bun.randomUUIDv7(),
          '--email',
          uniqueEmail(),
          '--password',
          PASSWORD,
          '--role',
          'god',
        ],
        ['--role must be one of owner, admin, member, viewer'],
      ],
    ]
    for (const [argv, mentions] of cases) {
      const result = await cli(ctx, ...argv)
      expect({ argv, code: result.code, stdout: result.stdout }).toEqual({ argv, code: 2, stdout: '' })
      for (const mention of mentions) expect(result.stderr).toContain(mention)
      expect(result.stderr).toContain('usage: bun run cli')
    }
  })

  test('--help on each command, on a topic and overall: exit 0 on stdout, without a database', async () => {
    for (const command of commands) {
      const io = captureIo()
      const environment = { DATABASE_URL: 'not a url' }
      expect(await runCli([...command.name.split(' '), '--help'], { io, environment })).toBe(0)
      expect(io.out).toContain(command.usage)
      expect(io.err).toBe('')
    }
    const topic = captureIo()
    expect(await runCli(['orgs', '--help'], { io: topic })).toBe(0)
    expect(topic.out).toContain('orgs set-plan')
    expect(topic.out).not.toContain('users create')
    const all = captureIo()
    expect(await runCli(['--help'], { io: all })).toBe(0)
    for (const command of commands) expect(all.out).toContain(command.name)
  })

  test('no command or an unknown one is exit 2 with the list of commands', async () => {
    for (const argv of [[], ['frobnicate'], ['orgs', 'delete'], ['orgs']]) {
      const io = captureIo()
      expect(await runCli(argv, { io })).toBe(2)
      expect(io.out).toBe('')
      expect(io.err).toContain('orgs create')
    }
  })

  test('a bad configuration is exit 1 naming the variable', async () => {
    const io = captureIo()
    const code = await runCli(['orgs', 'set-plan', Bun.randomUUIDv7(), 'pro'], {
      io,
      environment: { DATABASE_URL: 'mysql://nope' },
    })
    expect(code).toBe(1)
    expect(io.err).toContain('DATABASE_URL')
  })
})

// A subprocess opens its own connection, so it can only share a real PostgreSQL with the test app
// (an in-memory PGlite lives in this process).
describe.skipIf(!usingRealServices)('cli as a subprocess on PostgreSQL', () => {
  function spawnCli(...argv: string[]) {
    return runToEnd(['bun', CLI_ENTRY, ...argv], {
      env: { ...process.env, DATABASE_URL: process.env.DATABASE_URL!, LOG_LEVEL: 'warn' },
    })
  }

  test('orgs create, then set-plan free: the running app refuses integrations at once', async () => {
    const { app } = await makeTestApp()
    const email = uniqueEmail()
    const created = await spawnCli(
      'orgs',
      'create',
      '--name',
      'Spawned',
      '--owner-email',
      email,
      '--password',
      PASSWORD,
    )
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' })
    const { organization_id } = JSON.parse(created.stdout)
    const login = await (
      await app.handle(request('POST', '/api/auth/login', { json: { email, password: PASSWORD } }))
    ).json()
    const sources = () =>
      app.handle(request('POST', '/api/webhook/sources', { token: login.token, json: { name: 'x' } }))
    expect((await sources()).status).toBe(201)
    const downgraded = await spawnCli('orgs', 'set-plan', organization_id, 'free')
    expect(downgraded.code).toBe(0)
    expect(JSON.parse(downgraded.stdout)).toEqual({ organization_id, plan: 'free', features: [] })
    await expectError(await sources(), 403, 'plan_feature_required')
  }, 30_000)

  test('a long result reaches a slow reader whole: the process exits only once stdout has drained', async () => {
    const email = uniqueEmail()
    const created = await spawnCli(
      'orgs',
      'create',
      '--name',
      'Pipe',
      '--owner-email',
      email,
      '--password',
      PASSWORD,
    )
    const { organization_id } = JSON.parse(created.stdout)
    const count = 5_000
    // Far more than a pipe holds (64 KiB), into a reader that starts late: a shell pipe, since a
    // pipe to this process would be read into memory at once and never fill.
    const command = `bun ${CLI_ENTRY} sources create --org ${organization_id} --name piped --count ${count} | (sleep 1.5; cat)`
    const child = Bun.spawn(['sh', '-c', command], {
      env: { ...process.env, DATABASE_URL: process.env.DATABASE_URL!, LOG_LEVEL: 'warn' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ])
    expect({ code, stderr }).toEqual({
      code: 0,
      stderr: `created ${count} sources in organization ${organization_id}\n`,
    })
    const lines = stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(count)
    expect(new Set(lines).size).toBe(count)
  }, 60_000)

  test('exit codes: 2 for usage, 1 for an unknown organization', async () => {
    const usage = await spawnCli('users', 'create', '--org', 'x')
    expect(usage.code).toBe(2)
    expect(usage.stderr).toContain('usage: bun run cli users create')
    const missing = await spawnCli('orgs', 'set-plan', Bun.randomUUIDv7(), 'pro')
    expect(missing).toEqual({ code: 1, stdout: '', stderr: 'error: organization not found (not_found)\n' })
  }, 30_000)
})
