import { describe, expect, test } from 'bun:test'
import { createApp } from '../../src/app'
import { FakeClock } from '../../src/lib/clock'
import { generateSecret } from '../../src/lib/secrets'
import { accessLinesOf, loggedLines, makeTestApp, makeTestContext, request } from '../helpers/test-app'

function expectRateLimitHeaders(response: Response, limit: number) {
  expect(response.headers.get('x-ratelimit-limit')).toBe(String(limit))
  expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0)
  expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0)
}

describe('probes', () => {
  test('/healthz answers ok and is not rate-limited', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(request('GET', '/healthz'))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
    expect(response.headers.get('x-ratelimit-limit')).toBeNull()
  })

  test('/readyz reports the database and the limiter; 503 while draining', async () => {
    const { app, ctx } = await makeTestApp()
    const ready = await app.handle(request('GET', '/readyz'))
    expect(ready.status).toBe(200)
    const body = await ready.json()
    expect(body).toMatchObject({ status: 'ready', draining: false, database: { status: 'up' } })
    expect(body.rate_limiter.status).toBe('up')
    ctx.lifecycle.draining = true
    const draining = await app.handle(request('GET', '/readyz'))
    expect(draining.status).toBe(503)
    expect(await draining.json()).toMatchObject({ status: 'not_ready', draining: true })
  })
})

describe('errors and headers', () => {
  test('an unknown route is a 404 with the error body, request id and rate-limit headers', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(
      request('GET', '/api/nothing-here', { headers: { 'x-request-id': 'req-123' } }),
    )
    expect(response.status).toBe(404)
    expect(response.headers.get('content-type')).toContain('application/json')
    expect(response.headers.get('x-request-id')).toBe('req-123')
    expectRateLimitHeaders(response, 100)
    expect(await response.json()).toEqual({
      error: 'not_found',
      message: 'route not found',
      request_id: 'req-123',
    })
  })

  test('a request id is generated when absent or unusable', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(
      request('GET', '/api/nothing', { headers: { 'x-request-id': 'bad id with spaces' } }),
    )
    const id = response.headers.get('x-request-id')
    expect(id).toMatch(/^[0-9a-f-]{36}$/)
    expect((await response.json()).request_id).toBe(id)
  })

  test('a 500 hides the cause, keeps the headers and logs the error', async () => {
    const ctx = await makeTestContext()
    const app = createApp(ctx).get('/api/test-explode', () => {
      throw new Error('secret internal detail')
    })
    const response = await app.handle(request('GET', '/api/test-explode'))
    expect(response.status).toBe(500)
    expectRateLimitHeaders(response, 100)
    const body = await response.json()
    expect(body).toEqual({
      error: 'internal_error',
      message: 'an unexpected error occurred',
      request_id: response.headers.get('x-request-id'),
    })
    const lines = loggedLines(ctx)
    expect(
      lines.some(
        (line) => line.msg === 'unhandled error' && JSON.stringify(line).includes('secret internal'),
      ),
    ).toBe(true)
  })

  test('a database outage is a 503 with Retry-After, never a 500', async () => {
    const ctx = await makeTestContext()
    const app = createApp(ctx).get('/api/test-db-down', () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    })
    const response = await app.handle(request('GET', '/api/test-db-down'))
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('5')
    expect((await response.json()).error).toBe('service_unavailable')
  })
})

describe('management rate limit', () => {
  test('the 101st request in a minute is a 429 with the body and Retry-After; the window slides', async () => {
    const clock = new FakeClock()
    const { app } = await makeTestApp({ clock })
    const ip = `198.51.100.${Math.floor(Math.random() * 250)}`
    const call = () =>
      app.handle(request('GET', '/api/unknown-endpoint', { headers: { 'x-forwarded-for': ip } }))
    for (let index = 0; index < 100; index++) {
      const response = await call()
      expect(response.status).toBe(404)
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(99 - index))
      clock.advance(100)
    }
    const refused = await call()
    expect(refused.status).toBe(429)
    // The first request was 10 s ago, so the window frees a slot in 50 s.
    expect(refused.headers.get('retry-after')).toBe('50')
    expect(refused.headers.get('x-ratelimit-limit')).toBe('100')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(refused.headers.get('x-ratelimit-reset')).toBe('50')
    expect(await refused.json()).toEqual({
      error: 'rate_limited',
      message: expect.stringContaining('100 requests per minute'),
      request_id: refused.headers.get('x-request-id'),
      limit: 100,
      remaining: 0,
      retry_after: 50,
    })
    // Another client is not affected.
    const other = await app.handle(
      request('GET', '/api/unknown-endpoint', { headers: { 'x-forwarded-for': '192.0.2.1' } }),
    )
    expect(other.status).toBe(404)
    clock.advance(50_000)
    expect((await call()).status).toBe(404)
  })
})

describe('tracker.js rate limit', () => {
  test('visitors behind one IP are not cut off: only the platform-wide cap applies', async () => {
    const { app } = await makeTestApp()
    const ip = '198.51.100.77'
    for (let index = 0; index < 150; index++) {
      const response = await app.handle(
        request('GET', '/api/webhook/tracker.js', { headers: { 'x-forwarded-for': ip } }),
      )
      expect(response.status).toBe(200)
      expect(response.headers.get('x-ratelimit-limit')).toBe('600000')
    }
  })
})

describe('redis down', () => {
  test('requests are still served within a second and readiness reports the fallback', async () => {
    const { app, ctx } = await makeTestApp({ env: { REDIS_URL: 'redis://127.0.0.1:1' } })
    const started = performance.now()
    for (let index = 0; index < 20; index++) {
      const response = await app.handle(request('GET', '/api/unknown'))
      expect(response.status).toBe(404)
      expectRateLimitHeaders(response, 100)
    }
    expect(performance.now() - started).toBeLessThan(1000)
    const ready = await app.handle(request('GET', '/readyz'))
    expect(ready.status).toBe(200)
    expect((await ready.json()).rate_limiter).toMatchObject({ kind: 'redis', status: 'degraded' })
    await ctx.close()
  })
})

describe('logging', () => {
  test('one JSON line per request, with secrets in the path masked', async () => {
    const ctx = await makeTestContext()
    const app = createApp(ctx)
    const key = generateSecret('source_key')
    await app.handle(request('GET', `/api/unknown/${key}?x=1`, { headers: { 'x-request-id': 'log-test' } }))
    // onAfterResponse runs after the response is returned.
    await accessLinesOf(ctx, 1)
    const lines = loggedLines(ctx)
    const line = lines.find((entry) => entry.request_id === 'log-test')
    expect(line).toMatchObject({ level: 'info', msg: 'request', method: 'GET', status: 404 })
    expect(String(line?.path)).toMatch(/^\/api\/unknown\/flwh_[0-9A-Za-z]{4}…[0-9A-Za-z]{4}$/)
    expect(JSON.stringify(lines)).not.toContain(key)
  })
})

describe('openapi', () => {
  test('Swagger UI at /swagger and the document at /swagger/json', async () => {
    const { app } = await makeTestApp()
    const ui = await app.handle(request('GET', '/swagger'))
    expect(ui.status).toBe(200)
    expect(ui.headers.get('content-type')).toContain('text/html')
    expect(await ui.text()).toContain('swagger-ui')
    const spec = await app.handle(request('GET', '/swagger/json'))
    expect(spec.status).toBe(200)
    const document = await spec.json()
    expect(document.openapi).toMatch(/^3\./)
    expect(document.info.title).toBe('Lead Capture API')
    expect(document.paths['/readyz']).toBeDefined()
    // Paths with a dot in them are documented too.
    expect(document.paths['/api/webhook/tracker.js']?.get).toBeDefined()
    expect(document.paths['/api/webhook/lead/{api_key}']?.post).toBeDefined()
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
  })
})
