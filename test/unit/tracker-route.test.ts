import { describe, expect, test } from 'bun:test'
import { createApp } from '../../src/app'
import { buildTracker } from '../../src/tracker/build'
import { makeTestApp, makeTestContext, request } from '../helpers/test-app'

const PATH = '/api/webhook/tracker.js'
const prebuilt = buildTracker()

async function appWithTracker() {
  const ctx = await makeTestContext()
  const tracker = await prebuilt
  return { app: createApp(ctx, { tracker }), tracker }
}

describe('GET /api/webhook/tracker.js', () => {
  test('200: the script from memory, with the headers of DESIGN §9, no auth needed', async () => {
    const { app, tracker } = await appWithTracker()
    const response = await app.handle(request('GET', PATH, { headers: { origin: 'https://shop.example' } }))
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/javascript; charset=utf-8')
    expect(response.headers.get('etag')).toBe(tracker.etag)
    expect(response.headers.get('cache-control')).toBe('public, max-age=3600')
    expect(response.headers.get('access-control-allow-origin')).toBe('*')
    expect(response.headers.get('cross-origin-resource-policy')).toBe('cross-origin')
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    expect(response.headers.get('vary')).toBe('Accept-Encoding')
    expect(response.headers.get('content-encoding')).toBeNull()
    expect(response.headers.get('x-request-id')).toBeTruthy()
    expect(response.headers.get('x-ratelimit-limit')).toBeTruthy()
    const body = await response.text()
    expect(body).toBe(tracker.code)
    expect(body).toContain('data-webhook-url')
    expect(body).toContain('[LeadCapture]')
  })

  test('gzip when accepted: precompressed body with its own ETag', async () => {
    const { app, tracker } = await appWithTracker()
    const response = await app.handle(
      request('GET', PATH, { headers: { 'accept-encoding': 'gzip, deflate, br' } }),
    )
    expect(response.status).toBe(200)
    expect(response.headers.get('content-encoding')).toBe('gzip')
    expect(response.headers.get('content-type')).toBe('application/javascript; charset=utf-8')
    const etag = response.headers.get('etag')
    expect(etag).toBe(`${tracker.etag.slice(0, -1)}-gzip"`)
    const bytes = new Uint8Array(await response.arrayBuffer())
    expect(bytes.byteLength).toBe(tracker.gzipBytes)
    expect(new TextDecoder().decode(Bun.gunzipSync(bytes))).toBe(tracker.code)
  })

  test('304 with If-None-Match of the current build (strong, weak, listed, either encoding, *)', async () => {
    const { app, tracker } = await appWithTracker()
    const gzipTag = `${tracker.etag.slice(0, -1)}-gzip"`
    for (const ifNoneMatch of [tracker.etag, `W/${tracker.etag}`, `"stale", ${tracker.etag}`, gzipTag, '*']) {
      const response = await app.handle(request('GET', PATH, { headers: { 'if-none-match': ifNoneMatch } }))
      expect(response.status).toBe(304)
      expect(await response.text()).toBe('')
      expect(response.headers.get('etag')).toBe(tracker.etag)
      expect(response.headers.get('cache-control')).toBe('public, max-age=3600')
      expect(response.headers.get('access-control-allow-origin')).toBe('*')
    }
  })

  test('200 again when If-None-Match names an older build', async () => {
    const { app, tracker } = await appWithTracker()
    const response = await app.handle(
      request('GET', PATH, { headers: { 'if-none-match': '"an-old-build"' } }),
    )
    expect(response.status).toBe(200)
    expect(response.headers.get('etag')).toBe(tracker.etag)
    expect(await response.text()).toBe(tracker.code)
  })

  test('an app created without a prebuilt script builds it on the first request, once', async () => {
    const { app } = await makeTestApp()
    const tracker = await prebuilt
    const [first, second] = await Promise.all([
      app.handle(request('GET', PATH)),
      app.handle(request('GET', PATH)),
    ])
    expect(first.status).toBe(200)
    expect(second.status).toBe(200)
    expect(first.headers.get('etag')).toBe(tracker.etag)
    expect(await first.text()).toBe(tracker.code)
    const revalidated = await app.handle(request('GET', PATH, { headers: { 'if-none-match': tracker.etag } }))
    expect(revalidated.status).toBe(304)
  })
})
