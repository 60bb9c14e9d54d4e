import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { AppContext } from '../../src/context'
import { FakeClock } from '../../src/lib/clock'
import { MAX_JSON_DEPTH } from '../../src/lib/input-guard'
import { uniqueEmail } from '../helpers/emails'
import { createLead, createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import { makeTestApp, request } from '../helpers/test-app'

/**
 * The shared input guard (docs/security.md, "Input limits") on every route of the app: JSON nested
 * deeper than 32 levels is a cheap 400 `invalid_body`; a NUL or a lone surrogate anywhere in a body
 * (values and keys, at any depth), a query parameter or a path parameter is a 400
 * `validation_failed` whose details name it; a timestamp filter with year 0000 likewise. On `main`
 * before the guard these answered 500 (the value reached PostgreSQL, or JSON.parse recursed).
 */

type App = Awaited<ReturnType<typeof makeTestApp>>['app']
interface RouteInfo {
  method: string
  path: string
  hooks?: {
    body?: { properties?: Record<string, unknown> }
    query?: { properties?: Record<string, unknown> }
    parse?: unknown
  }
}

let app: App
let ctx: AppContext
// Moved a minute on before every request, so no rate-limit window (5 sign-ups a minute…) interferes.
const clock = new FakeClock(Date.now())
let token: string
let ownerId: string
let sourceId: string
let apiKey: string
let leadId: string

beforeAll(async () => {
  ;({ app, ctx } = await makeTestApp({ clock }))
  const organization = await createOrganization(ctx)
  const owner = await createUser(ctx, organization.id, { role: 'owner' })
  ownerId = owner.id
  token = await createSession(ctx, owner.id)
  const source = await createSource(ctx, organization.id, { spamFilter: false })
  sourceId = source.source.id
  apiKey = source.apiKey
  leadId = (await createLead(ctx, organization.id, { sourceId })).id
}, 60_000)

afterAll(async () => {
  await ctx?.close()
})

const INBOUND = '/api/webhook/lead/:api_key'
const BAD_TEXT = ['\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\udc00\ud800'] as const

function routes(): RouteInfo[] {
  return (app.routes as RouteInfo[]).filter((route) => route.path.startsWith('/api/'))
}

/** Every route that takes a body: the inbound one and every management POST/PATCH/PUT. */
function bodyRoutes(): RouteInfo[] {
  return routes().filter((route) => ['POST', 'PATCH', 'PUT'].includes(route.method))
}

/** Real ids where the route names them, so the request reaches as far as it can. */
function fill(path: string, overrides: Record<string, string> = {}): string {
  return path.replace(/:([A-Za-z_]+)/g, (_match, name: string) => {
    if (name in overrides) return overrides[name]!
    if (name === 'api_key') return apiKey
    if (name === 'lead_id') return leadId
    if (name === 'id' || name === 'source_id') return sourceId
    return crypto.randomUUID()
  })
}

function send(method: string, path: string, body?: string) {
  clock.advance(61_000)
  return app.handle(
    request(method, path, {
      body,
      token,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
    }),
  )
}

async function expectRefusal(response: Response, status: number, code: string, what: string) {
  const text = await response.text()
  let body: { error?: string; message?: string; request_id?: string; details?: Array<{ path: string }> }
  try {
    body = JSON.parse(text)
  } catch {
    throw new Error(`${what}: ${response.status} ${text.slice(0, 200)}`)
  }
  expect({ what, status: response.status, error: body.error }).toEqual({ what, status, error: code })
  expect(typeof body.message).toBe('string')
  expect(body.request_id).toBe(response.headers.get('x-request-id')!)
  expect(response.headers.get('content-type')).toContain('application/json')
  return body
}

/** `{"a":[{"a":[…]}]}`: `levels` arrays and objects in total, `leaf` innermost. */
function nested(levels: number, leaf: unknown): unknown {
  let value = leaf
  for (let level = 0; level < levels; level++) value = level % 2 === 0 ? [value] : { a: value }
  return value
}

/** The JSON pointer of the leaf of `nested(levels, …)` below `prefix`. */
function nestedPath(prefix: string, levels: number): string {
  let path = ''
  for (let level = 0; level < levels; level++) path = (level % 2 === 0 ? '/0' : '/a') + path
  return prefix + path
}

describe(`JSON nesting deeper than ${MAX_JSON_DEPTH} levels`, () => {
  test('every JSON route answers an 80 KB body nested 40,000 levels with a cheap 400 invalid_body', async () => {
    const deep = `{"a":${'['.repeat(40_000)}${']'.repeat(40_000)}}`
    const list = bodyRoutes()
    expect(list.map((route) => route.path)).toContain(INBOUND)
    expect(list.length).toBeGreaterThan(8)
    for (const route of list) {
      const started = performance.now()
      const response = await send(route.method, fill(route.path), deep)
      const body = await expectRefusal(response, 400, 'invalid_body', `${route.method} ${route.path}`)
      expect(body.details![0]!.path).toBe('/')
      // On main: ~650 ms of CPU and a 500. The scan is linear; the bound only separates the two.
      expect(performance.now() - started).toBeLessThan(400)
      if (!route.path.startsWith('/api/auth/') && route.path !== INBOUND) {
        expect(response.headers.get('x-ratelimit-limit')).not.toBeNull()
      }
    }
  })

  test('33 levels are refused, 32 are parsed (then judged by the schema), brackets in strings do not count', async () => {
    for (const route of bodyRoutes()) {
      const path = fill(route.path)
      const what = `${route.method} ${route.path}`
      // The body object is level 1.
      await expectRefusal(
        await send(route.method, path, JSON.stringify({ a: nested(MAX_JSON_DEPTH, 1) })),
        400,
        'invalid_body',
        `${what} at ${MAX_JSON_DEPTH + 1} levels`,
      )
      const atLimit = await send(route.method, path, JSON.stringify({ a: nested(MAX_JSON_DEPTH - 1, 1) }))
      const text = await atLimit.text()
      expect({ what, error: text ? (JSON.parse(text) as { error?: string }).error : null }).not.toEqual({
        what,
        error: 'invalid_body',
      })
      expect(atLimit.status).toBeLessThan(500)
    }
    // The loop's well-formed POST /api/auth/logout ended the session.
    token = await createSession(ctx, ownerId)
    const brackets = await send(
      'POST',
      '/api/webhook/sources',
      // 60 brackets, a quote and a backslash inside one string: text, not nesting.
      JSON.stringify({ name: `${'[{'.repeat(20)}"\\${'['.repeat(20)}` }),
    )
    expect(brackets.status).toBe(201)
  })

  test('inbound: a lead with a custom field at the deepest allowed level is stored', async () => {
    const response = await send(
      'POST',
      fill(INBOUND),
      JSON.stringify({
        email: uniqueEmail('deep'),
        notes: nested(MAX_JSON_DEPTH - 1, 'x'),
      }),
    )
    expect(response.status).toBe(200)
    expect(((await response.json()) as { status: string }).status).toBe('created')
  })
})

describe('NUL and lone surrogates: 400 validation_failed naming the field, on every route', () => {
  test('the instances the probe found', async () => {
    const cases: Array<[string, string, unknown, string]> = [
      [
        'POST',
        '/api/auth/signup',
        {
          email: uniqueEmail(),
          password: 'a long password',
          organization_name: 'a\u0000',
        },
        '/organization_name',
      ],
      ['POST', '/api/webhook/sources', { name: 'src\u0000' }, '/name'],
      ['POST', '/api/webhook/sources', { name: 'src\ud800' }, '/name'],
      [
        'POST',
        '/api/webhook/sources',
        { name: 'x', field_mapping: { 'Mail\u0000': 'email' } },
        '/field_mapping/Mail\uFFFD',
      ],
      [
        'PATCH',
        `/api/webhook/sources/${sourceId}`,
        { field_mapping: { '\ud800': 'email' } },
        '/field_mapping/\uFFFD',
      ],
      ['POST', '/api/pat', { name: 'pat\u0000', scopes: ['leads.read'] }, '/name'],
      ['PATCH', `/api/v2/leads/${leadId}`, { first_name: '\u0000' }, '/first_name'],
      ['PATCH', `/api/v2/leads/${leadId}`, { status: 'new\ud800' }, '/status'],
      ['PATCH', `/api/v2/leads/${leadId}`, { custom_fields: { note: 'x\u0000' } }, '/custom_fields/note'],
      ['PATCH', `/api/v2/leads/${leadId}`, { custom_fields: { 'n\u0000': 'x' } }, '/custom_fields/n\uFFFD'],
      ['POST', fill(INBOUND), { email: 'a@example.com', company: { name: ['\u0000'] } }, '/company/name/0'],
    ]
    for (const [method, path, json, pointer] of cases) {
      const body = await expectRefusal(
        await send(method, path, JSON.stringify(json)),
        400,
        'validation_failed',
        `${method} ${path} ${pointer}`,
      )
      expect(body.details!.map((detail) => detail.path)).toContain(pointer)
    }
    const queries: Array<[string, string]> = [
      ['/api/v2/leads?q=%00', '/q'],
      ['/api/v2/leads?q=a%00b', '/q'],
      [`/api/webhook/sources/${sourceId}/logs?until=0000-01-01T00:00:00Z`, '/until'],
      [`/api/webhook/sources/${sourceId}/logs?since=0000-06-01T00:00:00%2B01:00`, '/since'],
      ['/api/v2/leads?created_after=0000-01-01T00:00:00Z', '/created_after'],
      [`/api/webhook/sources/%00`, '/id'],
    ]
    for (const [path, pointer] of queries) {
      const body = await expectRefusal(await send('GET', path), 400, 'validation_failed', `GET ${path}`)
      expect(body.details!.map((detail) => detail.path)).toContain(pointer)
    }
  })

  test('every body field of every route, any bad character, at any depth (values and keys)', async () => {
    const targets = bodyRoutes().flatMap((route) => {
      const fields =
        route.path === INBOUND
          ? ['email', 'first_name', 'phone_raw', 'custom_fields', 'anything']
          : Object.keys(route.hooks?.body?.properties ?? {})
      return fields.map((field) => ({ route, field }))
    })
    // Routes whose body schema lists fields: every one of them is covered.
    expect(targets.length).toBeGreaterThan(20)
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...targets),
        fc.constantFrom(...BAD_TEXT),
        fc.integer({ min: 0, max: MAX_JSON_DEPTH - 1 }),
        fc.boolean(),
        async ({ route, field }, bad, levels, inKey) => {
          const value = inKey ? nested(Math.max(levels - 1, 0), { [bad]: 1 }) : nested(levels, bad)
          const expected = inKey
            ? `${nestedPath(`/${field}`, Math.max(levels - 1, 0))}/${bad.replaceAll('\u0000', '\uFFFD').toWellFormed()}`
            : nestedPath(`/${field}`, levels)
          const body = await expectRefusal(
            await send(route.method, fill(route.path), JSON.stringify({ [field]: value })),
            400,
            'validation_failed',
            `${route.method} ${route.path} ${field} depth ${levels} key ${inKey}`,
          )
          expect(body.details!.map((detail) => detail.path)).toContain(expected)
        },
      ),
      { numRuns: 300, seed: 15 },
    )
  })

  test('every query parameter of every GET route and every path parameter', async () => {
    const getRoutes = routes().filter((route) => route.method === 'GET')
    let checked = 0
    for (const route of getRoutes) {
      for (const name of Object.keys(route.hooks?.query?.properties ?? {})) {
        for (const bad of ['%00', 'a%00', '%00z']) {
          const path = `${fill(route.path)}?${name}=${bad}`
          const body = await expectRefusal(await send('GET', path), 400, 'validation_failed', `GET ${path}`)
          expect(body.details!.map((detail) => detail.path)).toContain(`/${name}`)
          checked++
        }
      }
    }
    for (const route of routes()) {
      for (const name of route.path.match(/:[A-Za-z_]+/g) ?? []) {
        if (route.method === 'OPTIONS') continue
        const path = fill(route.path, { [name.slice(1)]: 'x%00y' })
        const response = await send(
          route.method,
          path,
          ['POST', 'PATCH', 'PUT'].includes(route.method) ? '{}' : undefined,
        )
        const body = await expectRefusal(response, 400, 'validation_failed', `${route.method} ${path}`)
        expect(body.details!.map((detail) => detail.path)).toContain(`/${name.slice(1)}`)
        checked++
      }
    }
    expect(checked).toBeGreaterThan(20)
  })
})
