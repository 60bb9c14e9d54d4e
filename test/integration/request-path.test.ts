import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { createApp } from '../../src/app'
import type { AppContext } from '../../src/context'
import { requestPath } from '../../src/lib/http'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import { loggedLines, makeSignedInApp, makeTestApp, request } from '../helpers/test-app'

/**
 * One canonical path (src/lib/http.ts requestPath) for routing, rate limits, probe exemptions and
 * access logs, whatever form the request line takes. HAProxy's stock check is `GET /readyz
 * HTTP/1.0` with no Host: Bun then hands over a relative URL, which app.handle cannot express, so
 * the request-line forms are sent over raw TCP sockets to a listening server.
 */

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** Sends `head` (+ body) on a new connection and reads the whole response (HTTP/1.0 or close). */
function rawRequest(port: number, head: string, body = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const socket = connect(port, '127.0.0.1', () => socket.write(head + body))
    socket.setTimeout(5000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      const lines = text.slice(0, split).split('\r\n')
      const status = Number(lines[0]?.split(' ')[1])
      const headers: Record<string, string> = {}
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({ status, headers, body: text.slice(split + 4) })
    })
  })
}

/**
 * Every way a client or balancer may write the request line of `path` (path without query), for
 * `method`, with `headers` (whole lines, e.g. `Authorization: Bearer …`) after the form's own.
 */
function requestLineForms(
  path: string,
  port: number,
  { method = 'GET', headers = [] }: { method?: string; headers?: string[] } = {},
): Array<{ name: string; head: string }> {
  const forms: Array<{ name: string; target: string; version: '1.0' | '1.1'; own?: string[] }> = [
    { name: 'HTTP/1.0, relative, no Host (HAProxy default check)', target: path, version: '1.0' },
    {
      name: 'HTTP/1.1, relative, Host, Connection: close',
      target: path,
      version: '1.1',
      own: [`Host: 127.0.0.1:${port}`],
    },
    { name: 'HTTP/1.0, absolute, no Host', target: `http://127.0.0.1:${port}${path}`, version: '1.0' },
    {
      name: 'HTTP/1.1, absolute, other Host',
      target: `http://balancer.internal${path}`,
      version: '1.1',
      own: ['Host: lb.example'],
    },
    // A parameter the list routes take (a management route refuses one it does not take; every
    // other route ignores it).
    { name: 'HTTP/1.0, relative, query string', target: `${path}?limit=50`, version: '1.0' },
    { name: 'HTTP/1.0, relative, trailing slash', target: `${path}/`, version: '1.0' },
    {
      name: 'HTTP/1.1, relative, trailing slash',
      target: `${path}/`,
      version: '1.1',
      own: [`Host: 127.0.0.1:${port}`],
    },
    {
      name: 'HTTP/1.0, relative, User-Agent and Accept',
      target: path,
      version: '1.0',
      own: ['User-Agent: check', 'Accept: */*'],
    },
  ]
  return forms.map((form) => ({
    name: form.name,
    head: [
      `${method} ${form.target} HTTP/${form.version}`,
      ...(form.own ?? []),
      ...(form.version === '1.1' ? ['Connection: close'] : []),
      ...headers,
      '',
      '',
    ].join('\r\n'),
  }))
}

describe('requestPath: one canonical path for every URL form', () => {
  const cases: Array<[string, string]> = [
    ['http://localhost/readyz', '/readyz'],
    ['/readyz', '/readyz'],
    ['/readyz/', '/readyz'],
    ['/readyz?x=1', '/readyz'],
    ['/readyz//?x=1', '/readyz'],
    ['http://h:8080/api/auth/login/', '/api/auth/login'],
    ['http://h/api/pat/?a=b', '/api/pat'],
    ['https://h/', '/'],
    ['http://h', '/'],
    ['/', '/'],
    ['http://h/api/webhook/sources/0190/regenerate-key/', '/api/webhook/sources/0190/regenerate-key'],
  ]
  for (const [url, expected] of cases) {
    test(`${url} → ${expected}`, () => {
      const fake = { url } as Request
      expect(requestPath(fake)).toBe(expected)
    })
  }
})

describe('probes over a real socket, in every request-line form', () => {
  let ctx: AppContext
  let server: { stop(force?: boolean): unknown; port?: number }
  let port: number

  beforeAll(async () => {
    const built = await makeTestApp({ env: { TRUST_PROXY: '' } })
    ctx = built.ctx
    const app = createApp(ctx).listen({ port: 0, hostname: '127.0.0.1' })
    server = app.server!
    port = app.server!.port!
  })
  afterAll(() => {
    server.stop(true)
  })

  // 130 probes of each form from one IP: more than the anonymous 100/min would allow if they
  // were counted, and none of them limited, none logged.
  for (const path of ['/readyz', '/healthz']) {
    test(`${path}: 130 probes of each form all answer 200, carry no rate-limit headers, are not logged`, async () => {
      const lines = loggedLines(ctx)
      const loggedBefore = lines.filter((line) => line.msg === 'request').length
      for (const form of requestLineForms(path, port)) {
        for (let index = 0; index < 130; index++) {
          const response = await rawRequest(port, form.head)
          if (response.status !== 200 || response.headers['x-ratelimit-limit'] !== undefined) {
            throw new Error(
              `${form.name}, probe ${index + 1}: ${response.status} ${JSON.stringify(response)}`,
            )
          }
          if (index === 0) {
            const body = JSON.parse(response.body)
            expect(body.status).toBe(path === '/readyz' ? 'ready' : 'ok')
          }
        }
      }
      await Bun.sleep(20)
      expect(lines.filter((line) => line.msg === 'request').length).toBe(loggedBefore)
    }, 120_000)
  }

  test('an API path routes and is limited alike in every request-line form (no Host included)', async () => {
    const statuses = new Map<string, number>()
    const limits = new Set<string | undefined>()
    for (const form of requestLineForms('/api/auth/me', port)) {
      const response = await rawRequest(port, form.head)
      statuses.set(form.name, response.status)
      limits.add(response.headers['x-ratelimit-limit'])
      expect(JSON.parse(response.body)).toMatchObject({
        error: 'unauthorized',
        request_id: expect.any(String),
      })
    }
    expect([...new Set(statuses.values())]).toEqual([401])
    expect([...limits]).toEqual(['100'])
    // And the access log names the canonical path whatever the form.
    await Bun.sleep(20)
    const lines = loggedLines(ctx)
    const paths = new Set(
      lines.filter((line) => line.msg === 'request' && line.status === 401).map((line) => line.path),
    )
    expect([...paths]).toEqual(['/api/auth/me'])
  })
  test('the webhook POST in every request-line form: a lead stored, the client IP and the canonical path logged', async () => {
    const organization = await createOrganization(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    const path = `/api/webhook/lead/${apiKey}`
    const names = requestLineForms(path, port).map((form) => form.name)
    const answers: Array<{ form: string; status: number; outcome: unknown; requestId: string | undefined }> =
      []
    for (const [index, name] of names.entries()) {
      const body = JSON.stringify({ email: uniqueEmail(`request-line-${index}`) })
      const form = requestLineForms(path, port, {
        method: 'POST',
        headers: ['Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`],
      })[index]!
      const response = await rawRequest(port, form.head, body)
      answers.push({
        form: name,
        status: response.status,
        outcome: JSON.parse(response.body).status ?? response.body,
        requestId: response.headers['x-request-id'],
      })
    }
    expect(answers.map(({ form, status, outcome }) => ({ form, status, outcome }))).toEqual(
      names.map((form) => ({ form, status: 200, outcome: 'created' })),
    )
    await Bun.sleep(20)
    const lines = loggedLines(ctx).filter((line) =>
      answers.some((answer) => answer.requestId === line.request_id),
    )
    expect(lines.map(({ path: logged, status, client_ip }) => ({ path: logged, status, client_ip }))).toEqual(
      names.map(() => ({
        path: `/api/webhook/lead/${apiKey.slice(0, 9)}…${apiKey.slice(-4)}`,
        status: 200,
        client_ip: '127.0.0.1',
      })),
    )
  })

  // A route Bun serves natively hands its handler the parameters Bun parsed from the request; a
  // request line without Host (or with a trailing slash) is routed as a canonical copy, which once
  // reached that handler without them: 400 "must be an object" on every such route.
  test('routes with path parameters answer alike in every request-line form', async () => {
    const organization = await createOrganization(ctx)
    const user = await createUser(ctx, organization.id, { role: 'owner' })
    const token = await createSession(ctx, user.id)
    const { source, apiKey } = await createSource(ctx, organization.id)
    const auth = [`Authorization: Bearer ${token}`]
    const routes: Array<{
      name: string
      method: string
      path: string
      headers: string[]
      status: number
      check: (body: Record<string, unknown>) => unknown
    }> = [
      {
        name: 'GET the webhook URL (described)',
        method: 'GET',
        path: `/api/webhook/lead/${apiKey}`,
        headers: [],
        status: 200,
        check: (body) => body.method,
      },
      {
        name: 'GET a source',
        method: 'GET',
        path: `/api/webhook/sources/${source.id}`,
        headers: auth,
        status: 200,
        check: (body) => body.id,
      },
      {
        name: 'GET a source that does not exist',
        method: 'GET',
        path: '/api/webhook/sources/01a21fbd-0000-7000-8000-000000000000',
        headers: auth,
        status: 404,
        check: (body) => body.error,
      },
      {
        name: "GET a source's logs",
        method: 'GET',
        path: `/api/webhook/sources/${source.id}/logs`,
        headers: auth,
        status: 200,
        check: (body) => Array.isArray(body.data),
      },
    ]
    const seen: Array<{ route: string; form: string; status: number; checked: unknown }> = []
    const expected: typeof seen = []
    for (const route of routes) {
      const canonical = await rawRequest(
        port,
        requestLineForms(route.path, port, { headers: route.headers })[1]!.head,
      )
      const reference = route.check(JSON.parse(canonical.body))
      for (const form of requestLineForms(route.path, port, {
        method: route.method,
        headers: route.headers,
      })) {
        const response = await rawRequest(port, form.head)
        seen.push({
          route: route.name,
          form: form.name,
          status: response.status,
          checked: route.check(JSON.parse(response.body)),
        })
        expected.push({ route: route.name, form: form.name, status: route.status, checked: reference })
      }
    }
    expect(seen).toEqual(expected)
  })
})

describe('trailing slash: the non-canonical form shares the tighter limit of its route', () => {
  const tighter: Array<{ name: string; method: string; path: (sourceId: string) => string; limit: number }> =
    [
      { name: 'login', method: 'POST', path: () => '/api/auth/login', limit: 10 },
      { name: 'signup', method: 'POST', path: () => '/api/auth/signup', limit: 5 },
      { name: 'PAT creation', method: 'POST', path: () => '/api/pat', limit: 10 },
      {
        name: 'key regeneration',
        method: 'POST',
        path: (sourceId) => `/api/webhook/sources/${sourceId}/regenerate-key`,
        limit: 10,
      },
    ]
  for (const rule of tighter) {
    for (const suffix of ['/', '//', '/?x=1']) {
      test(`${rule.name}: "${suffix}" and the canonical form count in one bucket of ${rule.limit}`, async () => {
        const { app, ctx, organization, token } = await makeSignedInApp()
        const { source } = await createSource(ctx, organization.id)
        const ip = `198.51.100.${Math.floor(Math.random() * 250) + 1}`
        const canonical = rule.path(source.id)
        const statuses: number[] = []
        for (let index = 0; index <= rule.limit; index++) {
          // Alternate: the trailing form first, then the canonical one.
          const path = index % 2 === 0 ? `${canonical}${suffix}` : canonical
          const response = await app.handle(
            request(rule.method, path, { json: {}, token, headers: { 'x-forwarded-for': ip } }),
          )
          expect(response.headers.get('x-ratelimit-limit')).toBe(String(rule.limit))
          statuses.push(response.status)
          if (response.status === 429) {
            expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
            expect(await response.json()).toMatchObject({
              error: 'rate_limited',
              limit: rule.limit,
              remaining: 0,
            })
          }
        }
        expect(statuses.slice(0, rule.limit).includes(429)).toBe(false)
        expect(statuses[rule.limit]).toBe(429)
      })
    }
  }
})

describe('anonymous and unmatched requests: bounded per client IP, bounded keys', () => {
  const longPath = (index: number) => `/api/${index}-${'x'.repeat(15_000)}`

  test('150 distinct 15 KB unmatched paths from one IP: the 101st is 429, the keys stay small', async () => {
    const prefix = `rl:test:${crypto.randomUUID()}:`
    const { app, ctx } = await makeTestApp({ rateLimitKeyPrefix: prefix })
    const ip = `203.0.113.${Math.floor(Math.random() * 250) + 1}`
    const statuses: number[] = []
    for (let index = 0; index < 150; index++) {
      const response = await app.handle(
        request('GET', longPath(index), { headers: { 'x-forwarded-for': ip } }),
      )
      statuses.push(response.status)
      if (response.status === 404) expect(response.headers.get('x-ratelimit-limit')).toBe('100')
    }
    expect(statuses.slice(0, 100)).toEqual(Array.from({ length: 100 }, () => 404))
    expect(statuses.slice(100)).toEqual(Array.from({ length: 50 }, () => 429))
    // Other anonymous requests of that IP share the bucket; another IP does not.
    expect(
      (await app.handle(request('GET', '/api/auth/me', { headers: { 'x-forwarded-for': ip } }))).status,
    ).toBe(429)
    expect(
      (await app.handle(request('GET', '/api/auth/me', { headers: { 'x-forwarded-for': '192.0.2.77' } })))
        .status,
    ).toBe(401)
    if (ctx.redis) {
      const keys = await ctx.redis.keys(`${prefix}*`)
      expect(keys.length).toBeGreaterThan(0)
      expect(keys.filter((key) => key.length > 200)).toEqual([])
      let bytes = 0
      for (const key of keys) bytes += Number(await ctx.redis.call('MEMORY', 'USAGE', key))
      // The defect stored ~16 KB per request (2.4 MB here); one bucket of 100 entries is a few KB.
      expect(bytes).toBeLessThan(64 * 1024)
    }
  })

  // Two deployments on one Redis (staging and production) must not share their limits' counts:
  // REDIS_KEY_PREFIX starts every key. Replicas of one deployment share them (with Redis).
  test('REDIS_KEY_PREFIX: another prefix keeps its own counts, replicas with the same one share them', async () => {
    const run = crypto.randomUUID().slice(0, 8)
    const deployment = async (prefix: string) =>
      makeTestApp({ env: { REDIS_KEY_PREFIX: prefix }, rateLimitKeyPrefix: undefined })
    const staging = await deployment(`staging-${run}:`)
    const production = await deployment(`production-${run}:`)
    const productionReplica = await deployment(`production-${run}:`)
    const ip = `198.51.100.${Math.floor(Math.random() * 250) + 1}`
    const get = (app: typeof staging.app) =>
      app.handle(request('GET', `/api/missing-${run}`, { headers: { 'x-forwarded-for': ip } }))
    for (let index = 0; index < 100; index++) expect((await get(staging.app)).status).toBe(404)
    expect((await get(staging.app)).status).toBe(429)

    const first = await get(production.app)
    expect(first.status).toBe(404)
    expect(first.headers.get('x-ratelimit-remaining')).toBe('99')
    const second = await get(productionReplica.app)
    expect(second.status).toBe(404)
    // One bucket across a deployment's replicas with Redis; without it each replica counts alone.
    expect(second.headers.get('x-ratelimit-remaining')).toBe(staging.ctx.redis ? '98' : '99')
    if (staging.ctx.redis) {
      expect((await staging.ctx.redis.keys(`staging-${run}:*`)).length).toBeGreaterThan(0)
      expect((await staging.ctx.redis.keys(`production-${run}:*`)).length).toBeGreaterThan(0)
    }
  })

  test('a signed-in user sending distinct unmatched paths is bounded too (one unmatched bucket)', async () => {
    const { app, token } = await makeSignedInApp()
    const statuses: number[] = []
    for (let index = 0; index < 101; index++) {
      statuses.push((await app.handle(request('GET', longPath(index), { token }))).status)
    }
    expect(statuses.slice(0, 100).every((status) => status === 404)).toBe(true)
    expect(statuses[100]).toBe(429)
    // Matched endpoints keep their own per-endpoint buckets.
    expect((await app.handle(request('GET', '/api/auth/me', { token }))).status).toBe(200)
  })
})
