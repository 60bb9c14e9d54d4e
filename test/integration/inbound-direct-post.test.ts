import { describe, expect, spyOn, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import type { Services } from '../../src/services'
import { createOrganization, createSource } from '../helpers/factories'
import { email } from '../helpers/inbound'
import { accessLinesOf, loggedLines, makeTestApp, request } from '../helpers/test-app'

/**
 * The webhook POST is served before Elysia's lifecycle (src/modules/inbound/direct-post.ts) when its
 * key needs no decoding and it has no query string; every other form of the same request goes
 * through the lifecycle to the route the inbound module declares. The class under test: **every
 * answer of the webhook POST is the same whichever of the two serves it** (status, headers, body,
 * access line), so each case below is sent both ways and compared. That the lifecycle did not run
 * is seen by the input guard's transform hook, which runs for every request Elysia routes.
 */

type Case = {
  name: string
  source?: Parameters<typeof createSource>[2]
  /** Sent before the compared request, on the same source (both ways). */
  before?: (send: (body: BodyInit, headers?: Record<string, string>) => Promise<Response>) => Promise<unknown>
  body: () => BodyInit
  headers?: Record<string, string>
  /** The key as sent; defaults to the source's. */
  key?: (apiKey: string) => string
  status: number
  /** `status` of an accepted submission's body, else its `error`. */
  outcome: string
}

const json = (value: unknown) => () => JSON.stringify(value)
const JSON_TYPE = { 'content-type': 'application/json' }

const CASES: Case[] = [
  { name: 'a new lead', body: () => JSON.stringify({ email: email() }), status: 200, outcome: 'created' },
  {
    name: 'the same person again',
    before: (send) => send(JSON.stringify({ email: 'again@example.com' })),
    body: json({ email: 'again@example.com', first_name: 'Ada' }),
    status: 200,
    outcome: 'updated',
  },
  {
    name: 'spam (honeypot)',
    body: () => JSON.stringify({ email: email(), _gotcha: 'x' }),
    status: 200,
    outcome: 'spam',
  },
  { name: 'no e-mail or phone', body: json({ first_name: 'Ada' }), status: 200, outcome: 'missing_contact' },
  { name: 'not JSON', body: () => '{"email": ', status: 400, outcome: 'invalid_json' },
  {
    name: 'another content type',
    body: () => 'email=a%40example.com',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 400,
    outcome: 'invalid_content_type',
  },
  { name: 'a field of the wrong type', body: json({ email: 42 }), status: 400, outcome: 'validation_failed' },
  {
    name: 'over 100 KB',
    body: () => JSON.stringify({ email: email(), note: 'x'.repeat(110_000) }),
    status: 413,
    outcome: 'payload_too_large',
  },
  {
    name: 'an unknown key',
    key: () => `flwh_${'A'.repeat(38)}`,
    body: json({ email: 'a@example.com' }),
    status: 404,
    outcome: 'webhook_not_found',
  },
  {
    name: 'a disabled source',
    source: { enabled: false },
    body: json({ email: 'a@example.com' }),
    status: 404,
    outcome: 'webhook_not_found',
  },
  {
    name: 'an origin outside the domain allow list',
    source: { domainAllowlist: ['forms.example.com'] },
    body: json({ email: 'a@example.com' }),
    headers: { origin: 'https://elsewhere.example' },
    status: 403,
    outcome: 'domain_not_allowed',
  },
  {
    name: 'an allowed origin (CORS headers)',
    source: { domainAllowlist: ['forms.example.com'] },
    body: () => JSON.stringify({ email: email() }),
    headers: { origin: 'https://forms.example.com' },
    status: 200,
    outcome: 'created',
  },
  {
    name: 'an IP outside the allow list',
    source: { ipAllowlist: ['203.0.113.0/24'] },
    body: json({ email: 'a@example.com' }),
    status: 403,
    outcome: 'ip_not_allowed',
  },
  {
    name: 'the 61st request of the minute',
    before: async (send) => {
      for (let index = 0; index < 60; index++) await send(JSON.stringify({ email: `n${index}@example.com` }))
    },
    body: () => JSON.stringify({ email: email() }),
    status: 429,
    outcome: 'rate_limited',
  },
  {
    name: 'a request id of the client',
    body: () => JSON.stringify({ email: email() }),
    headers: { 'x-request-id': 'client-chosen.id:1' },
    status: 200,
    outcome: 'created',
  },
]

/** The parts of an answer that must not differ between the two ways (ids and counts aside). */
async function shapeOf(response: Response) {
  const headers = Object.fromEntries(response.headers)
  const body = (await response.json()) as Record<string, unknown>
  const requestId = headers['x-request-id']
  expect(typeof requestId).toBe('string')
  if ('request_id' in body) expect(body.request_id).toBe(requestId)
  if ('lead_id' in body) expect(typeof body.lead_id).toBe('string')
  const { request_id: _request, lead_id: _lead, ...rest } = body
  const {
    'x-request-id': _id,
    'x-ratelimit-remaining': _remaining,
    'x-ratelimit-reset': _reset,
    ...others
  } = headers
  return { status: response.status, headers: others, body: rest, requestId }
}

/** The access lines of one request id (the onAfterResponse hook writes them after the answer). */
function accessLines(ctx: AppContext, requestId: string) {
  return loggedLines(ctx).filter((line) => line.msg === 'request' && line.request_id === requestId)
}

async function sourceOf(ctx: AppContext, options: Case['source']) {
  const organization = await createOrganization(ctx)
  return createSource(ctx, organization.id, options)
}

/** Sends one case on a source of its own, by the path given; returns the answer and the hook's count. */
async function sendCase(
  app: Awaited<ReturnType<typeof makeTestApp>>['app'],
  services: Services,
  ctx: AppContext,
  item: Case,
  query: string,
) {
  const { apiKey } = await sourceOf(ctx, item.source)
  const key = item.key?.(apiKey) ?? apiKey
  const send = (body: BodyInit, headers: Record<string, string> = {}) =>
    app.handle(
      request('POST', `/api/webhook/lead/${key}${query}`, { body, headers: { ...JSON_TYPE, ...headers } }),
    )
  await item.before?.(send)
  const transform = spyOn(services.inputGuard, 'checkRequest')
  try {
    const response = await send(item.body(), item.headers)
    return { response, lifecycleRan: transform.mock.calls.length > 0 }
  } finally {
    transform.mockRestore()
  }
}

describe('the webhook POST: the same answer before Elysia’s lifecycle and through it', () => {
  for (const item of CASES) {
    test(`${item.name}: ${item.status} ${item.outcome}, alike both ways`, async () => {
      const { app, ctx, services } = await makeTestApp()
      const direct = await sendCase(app, services, ctx, item, '')
      const routed = await sendCase(app, services, ctx, item, '?via=lifecycle')
      expect({ direct: direct.lifecycleRan, routed: routed.lifecycleRan }).toEqual({
        direct: false,
        routed: true,
      })

      const directShape = await shapeOf(direct.response)
      const routedShape = await shapeOf(routed.response)
      expect(directShape.status).toBe(item.status)
      const outcome =
        directShape.body.status === 'error' || item.status !== 200
          ? directShape.body.error
          : directShape.body.status
      expect(outcome).toBe(item.outcome)
      expect(directShape.headers).toEqual(routedShape.headers)
      expect(directShape.body).toEqual(routedShape.body)
      if (item.headers?.['x-request-id']) {
        expect([directShape.requestId, routedShape.requestId]).toEqual([
          item.headers['x-request-id'],
          item.headers['x-request-id'],
        ])
      }

      // One access line each, with the answer's status and id; the query string is not in the path
      // (the key in it is shortened to a hint, as in every access line).
      // A client's own id is the same both ways: then both lines carry it.
      const sameId = directShape.requestId === routedShape.requestId
      const lineOf = async (requestId: string) => {
        const deadline = performance.now() + 2_000
        let found = accessLines(ctx, requestId)
        while (found.length < (sameId ? 2 : 1) && performance.now() < deadline) {
          await Bun.sleep(2)
          found = accessLines(ctx, requestId)
        }
        return found.map(({ method, path, status }) => ({ method, path, status }))
      }
      const line = {
        method: 'POST',
        path: expect.stringMatching(/^\/api\/webhook\/lead\/[^/?]+$/),
        status: item.status,
      }
      const expected = sameId ? [line, line] : [line]
      expect(await lineOf(directShape.requestId!)).toEqual(expected)
      expect(await lineOf(routedShape.requestId!)).toEqual(expected)
    })
  }
})

describe('which requests the direct path takes', () => {
  const KEY = `flwh_${'b'.repeat(38)}`
  const forms: Array<{ method: string; path: string; direct: string | null }> = [
    { method: 'POST', path: `/api/webhook/lead/${KEY}`, direct: KEY },
    { method: 'POST', path: '/api/webhook/lead/short', direct: 'short' },
    { method: 'POST', path: `/api/webhook/lead/${KEY}?utm_source=x`, direct: null },
    { method: 'POST', path: `/api/webhook/lead/${KEY.replace('_', '%5F')}`, direct: null },
    { method: 'POST', path: `/api/webhook/lead/${KEY}%00`, direct: null },
    { method: 'POST', path: `/api/webhook/lead/${KEY}/extra`, direct: null },
    { method: 'POST', path: '/api/webhook/lead/', direct: null },
    { method: 'POST', path: '/api/webhook/lead', direct: null },
    { method: 'POST', path: `/api/webhook/lead//${KEY}`, direct: null },
    { method: 'POST', path: `/api/webhook/leads/${KEY}`, direct: null },
    { method: 'GET', path: `/api/webhook/lead/${KEY}`, direct: null },
    { method: 'OPTIONS', path: `/api/webhook/lead/${KEY}`, direct: null },
    { method: 'POST', path: '/api/webhook/sources', direct: null },
  ]

  test('by method, path and key: a real key without a query string only', async () => {
    const { app, services } = await makeTestApp({ contract: false })
    const taken: Array<{ method: string; path: string; direct: string | null }> = []
    const transform = spyOn(services.inputGuard, 'checkRequest')
    const receive = spyOn(services.inbound, 'receive')
    try {
      for (const form of forms) {
        transform.mockClear()
        receive.mockClear()
        const response = await app.handle(
          request(form.method, form.path, {
            json: form.method === 'POST' ? { email: 'a@example.com' } : undefined,
          }),
        )
        await response.arrayBuffer()
        // Served directly: the service received the key and the lifecycle's transform never ran.
        const direct =
          receive.mock.calls.length === 1 && transform.mock.calls.length === 0
            ? receive.mock.calls[0]![0].apiKey
            : null
        taken.push({ method: form.method, path: form.path, direct })
      }
    } finally {
      transform.mockRestore()
      receive.mockRestore()
    }
    expect(taken).toEqual(forms)
  })

  test('a trailing slash is made canonical first, then served directly', async () => {
    const { app, ctx, services } = await makeTestApp()
    const { apiKey } = await sourceOf(ctx, {})
    const transform = spyOn(services.inputGuard, 'checkRequest')
    try {
      const response = await app.handle(
        request('POST', `/api/webhook/lead/${apiKey}/`, { json: { email: email() } }),
      )
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ status: 'created', success: true })
      expect(transform).not.toHaveBeenCalled()
    } finally {
      transform.mockRestore()
    }
    const [line] = (await accessLinesOf(ctx, 1)).slice(-1)
    expect(line).toMatchObject({
      method: 'POST',
      path: `/api/webhook/lead/${apiKey.slice(0, 9)}…${apiKey.slice(-4)}`,
      status: 200,
    })
  })

  test('over a listening server (Bun serves the route natively): the same answer and access line', async () => {
    const { app, ctx, services } = await makeTestApp({ contract: false })
    const { apiKey } = await sourceOf(ctx, {})
    app.listen({ port: 0, hostname: '127.0.0.1' })
    const transform = spyOn(services.inputGuard, 'checkRequest')
    try {
      const response = await fetch(`http://127.0.0.1:${app.server!.port}/api/webhook/lead/${apiKey}`, {
        method: 'POST',
        headers: { ...JSON_TYPE, 'x-request-id': 'served-1' },
        body: JSON.stringify({ email: email() }),
      })
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('application/json;charset=utf-8')
      expect(response.headers.get('x-request-id')).toBe('served-1')
      expect(response.headers.get('x-ratelimit-limit')).toBe('60')
      expect(await response.json()).toMatchObject({ status: 'created', success: true })
      expect(transform).not.toHaveBeenCalled()
      const [line] = (await accessLinesOf(ctx, 1)).slice(-1)
      expect(line).toMatchObject({
        request_id: 'served-1',
        method: 'POST',
        status: 200,
        client_ip: '127.0.0.1',
      })
    } finally {
      transform.mockRestore()
      app.server?.stop(true)
    }
  })

  test('an error the service did not expect: 500 internal_error, logged, with the request id', async () => {
    const { app, ctx, services } = await makeTestApp({ contract: false })
    const receive = spyOn(services.inbound, 'receive').mockImplementation(() =>
      Promise.reject(new Error('boom')),
    )
    try {
      const response = await app.handle(
        request('POST', `/api/webhook/lead/flwh_${'c'.repeat(38)}`, { json: {} }),
      )
      expect(response.status).toBe(500)
      expect(response.headers.get('content-type')).toBe('application/json')
      const body = await response.json()
      expect(body).toEqual({
        error: 'internal_error',
        message: 'an unexpected error occurred',
        request_id: response.headers.get('x-request-id'),
      })
      const errorsLogged = loggedLines(ctx).filter((line) => line.level === 'error')
      expect(errorsLogged.map((line) => line.msg)).toEqual(['unhandled error', 'server error'])
      expect(errorsLogged.every((line) => line.request_id === body.request_id)).toBe(true)
    } finally {
      receive.mockRestore()
    }
  })
})
