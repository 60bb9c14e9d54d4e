import { beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { organizations, users } from '../../src/db/schema'
import { cliInProcess } from '../helpers/cli'
import { expectError } from '../helpers/common-route-tests'
import { createOrganization, createSignedInUser } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 10: the password rules (NIST SP 800-63B, src/lib/passwords.ts) on every path that
 * sets a password (sign-up, a member added by someone else, both CLI commands), and display names
 * trimmed and non-empty (organization, source, token).
 */
beforeAll(() => testDatabase(), 60_000)

const emoji = '\u{1F600}'
// Each is refused, with the reason the message must mention.
const REFUSED: Array<[string, string, string | RegExp]> = [
  ['8 spaces', ' '.repeat(8), 'spaces'],
  ['8 tabs and newlines', '\t\n\t\n\t\n\t\n', 'spaces'],
  ['8 ideographic spaces', '\u3000'.repeat(8), 'spaces'],
  ['8 zero-width spaces', '\u200b'.repeat(8), 'spaces'],
  ['8 no-break spaces', '\u00a0'.repeat(8), 'spaces'],
  ['4 emoji (8 UTF-16 units)', emoji.repeat(4), 'at least 8'],
  ['7 emoji', emoji.repeat(7), 'at least 8'],
  // Under 8 UTF-16 units the schema refuses first, in its own words.
  ['7 letters', 'tqbfjmp', /at least 8|from 8 to/],
  ['129 characters', 'k'.repeat(64) + 'Q'.repeat(65), 'at most 128'],
  ['common: password', 'password', 'common'],
  ['common: 12345678', '12345678', 'common'],
  ['common, other case: PassWord1', 'PassWord1', 'common'],
  ['common, padded: "  iloveyou  "', '  iloveyou  ', 'common'],
  ['common: qwertyuiop', 'qwertyuiop', 'common'],
  ['common: sunshine', 'sunshine', 'common'],
]
const ACCEPTED: Array<[string, string]> = [
  ['a passphrase', 'correct horse battery staple'],
  ['8 emoji', emoji.repeat(8)],
  ['128 emoji (256 UTF-16 units)', emoji.repeat(128)],
  ['128 characters', 'k'.repeat(64) + 'Q'.repeat(64)],
  ['spaces inside', 'tide  pool  lantern'],
  ['accents', 'Zürich-Gleis-Sieben'],
]

const email = () => `pw-${Bun.randomUUIDv7()}@example.com`

const cli = cliInProcess

/** Every way to choose a password: answers `null` when accepted, else the refusal's text. */
const PATHS: Array<{
  name: string
  attempt: (
    ctx: AppContext,
    app: Awaited<ReturnType<typeof makeTestApp>>['app'],
    password: string,
  ) => Promise<string | null>
}> = [
  {
    name: 'POST /api/auth/signup',
    async attempt(_ctx, app, password) {
      const response = await app.handle(
        request('POST', '/api/auth/signup', {
          json: { email: email(), password, organization_name: 'Acme' },
          // Sign-up is limited to 5 a minute per IP: each attempt from its own address.
          headers: {
            'x-forwarded-for': `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.7`,
          },
        }),
      )
      if (response.status === 201) return null
      const body = await expectError(response, 400, 'validation_failed')
      expect((body.details as Array<{ path: string }>).map((detail) => detail.path)).toEqual(['/password'])
      return `${body.message} ${JSON.stringify(body.details)}`
    },
  },
  {
    name: 'POST /api/v2/members',
    async attempt(ctx, app, password) {
      const { token } = await createSignedInUser(ctx)
      const address = email()
      const response = await app.handle(
        request('POST', '/api/v2/members', { token, json: { email: address, password, role: 'member' } }),
      )
      if (response.status === 201) return null
      const body = await expectError(response, 400, 'validation_failed')
      expect(await ctx.db.select().from(users).where(eq(users.email, address))).toEqual([])
      return `${body.message} ${JSON.stringify(body.details)}`
    },
  },
  {
    name: 'cli orgs create',
    async attempt(ctx, _app, password) {
      const result = await cli(
        ctx,
        'orgs',
        'create',
        '--name',
        'Acme',
        '--owner-email',
        email(),
        '--password',
        password,
      )
      if (result.code === 0) return null
      expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' })
      return result.stderr
    },
  },
  {
    name: 'cli users create',
    async attempt(ctx, _app, password) {
      const organization = await createOrganization(ctx)
      const args = ['users', 'create', '--org', organization.id, '--email', email(), '--password', password]
      const result = await cli(ctx, ...args, '--role', 'viewer')
      if (result.code === 0) return null
      expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' })
      return result.stderr
    },
  },
]

describe('password rules on every path that sets a password', () => {
  for (const path of PATHS) {
    test(`${path.name}: refused`, async () => {
      const { app, ctx } = await makeTestApp()
      for (const [label, password, reason] of REFUSED) {
        const refusal = await path.attempt(ctx, app, password)
        expect({ label, refused: refusal !== null }).toEqual({ label, refused: true })
        expect({ label, refusal }).toEqual({
          label,
          refusal:
            typeof reason === 'string' ? expect.stringContaining(reason) : expect.stringMatching(reason),
        })
        // The refusal never echoes the password.
        if (password.trim().length > 3 && password !== 'password')
          expect(refusal).not.toContain(password.trim())
      }
    })

    test(`${path.name}: accepted`, async () => {
      const { app, ctx } = await makeTestApp()
      for (const [label, password] of ACCEPTED) {
        expect({ label, refusal: await path.attempt(ctx, app, password) }).toEqual({ label, refusal: null })
      }
    })
  }

  test('a member created with an accepted password logs in with exactly it', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    const address = email()
    const password = emoji.repeat(8)
    expect(
      (
        await app.handle(
          request('POST', '/api/v2/members', { token, json: { email: address, password, role: 'viewer' } }),
        )
      ).status,
    ).toBe(201)
    const login = await app.handle(request('POST', '/api/auth/login', { json: { email: address, password } }))
    expect(login.status).toBe(200)
  })
})

describe('display names are trimmed and non-empty', () => {
  const BLANK = [' ', '   ', '\t', '\u200b', '\u3000 \u00a0']

  test('sign-up: organization_name', async () => {
    const { app, ctx } = await makeTestApp()
    for (const name of BLANK) {
      const response = await app.handle(
        request('POST', '/api/auth/signup', {
          json: { email: email(), password: 'correct horse battery staple', organization_name: name },
          headers: { 'x-forwarded-for': `10.9.${Math.floor(Math.random() * 250)}.8` },
        }),
      )
      const body = await expectError(response, 400, 'validation_failed')
      expect(body.details).toEqual([{ path: '/organization_name', message: expect.any(String) }])
    }
    const response = await app.handle(
      request('POST', '/api/auth/signup', {
        json: {
          email: email(),
          password: 'correct horse battery staple',
          organization_name: '  Acme Ltd \t',
        },
        headers: { 'x-forwarded-for': '10.9.251.8' },
      }),
    )
    expect(response.status).toBe(201)
    const created = await response.json()
    expect(created.organization.name).toBe('Acme Ltd')
    const [row] = await ctx.db
      .select()
      .from(organizations)
      .where(eq(organizations.id, created.organization.id))
    expect(row!.name).toBe('Acme Ltd')
  })

  test('cli orgs create --name', async () => {
    const { ctx } = await makeTestApp()
    for (const name of BLANK) {
      const result = await cli(
        ctx,
        'orgs',
        'create',
        '--name',
        name,
        '--owner-email',
        email(),
        '--password',
        'tide pool lantern',
      )
      expect({ name, code: result.code }).toEqual({ name, code: 2 })
      expect(result.stderr).toContain('--name')
    }
  })

  test('source name and token name (create and update)', async () => {
    const { app, ctx } = await makeTestApp()
    const { token } = await createSignedInUser(ctx)
    for (const name of BLANK) {
      for (const [method, path] of [
        ['POST', '/api/webhook/sources'],
        ['POST', '/api/pat'],
      ] as const) {
        const body = await expectError(
          await app.handle(request(method, path, { token, json: { name } })),
          400,
          'validation_failed',
        )
        expect(body.details).toEqual([{ path: '/name', message: expect.any(String) }])
      }
    }
    const source = await app.handle(
      request('POST', '/api/webhook/sources', { token, json: { name: ' Shop ' } }),
    )
    expect(source.status).toBe(201)
    const { id } = await source.json()
    const renamed = await app.handle(
      request('PATCH', `/api/webhook/sources/${id}`, { token, json: { name: '\u200b' } }),
    )
    await expectError(renamed, 400, 'validation_failed')
    const kept = await (await app.handle(request('GET', `/api/webhook/sources/${id}`, { token }))).json()
    expect(kept.name).toBe('Shop')
    const pat = await app.handle(request('POST', '/api/pat', { token, json: { name: '  ci  ' } }))
    expect(pat.status).toBe(201)
    expect((await pat.json()).name).toBe('ci')
  })
})
