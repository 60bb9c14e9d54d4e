import { beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { createSignedInUser, createSource } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'

/**
 * The management API's bodies are JSON. A media type is case-insensitive and may carry parameters
 * (RFC 9110 §8.3.1), and `application/<name>+json` is JSON (RFC 6839): each is read as JSON. Any
 * other body (a form, which `curl -d` sends by default, text, XML, none declared) is 415 naming what
 * to send: before, a form was a 400 whose detail named a field made of the whole body, `text/plain`
 * was read as JSON, and `APPLICATION/JSON` or `application/merge-patch+json` were 400 "does not match
 * the schema". Checked on every operation of the document that takes a body.
 */
const ID = '01900000-0000-7000-8000-000000000000'
const JSON_SPELLINGS = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'Application/Json;Charset=UTF-8',
  'application/merge-patch+json',
  'application/vnd.api+json',
]
const NOT_JSON: Array<string | null> = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'text/json',
  'application/jsonl',
  null,
]

beforeAll(async () => {
  await testDatabase()
}, 60_000)

function send(
  app: Awaited<ReturnType<typeof makeTestApp>>['app'],
  method: string,
  path: string,
  type: string | null,
  body: string,
  token?: string,
) {
  const headers: Record<string, string> = {}
  if (type !== null) headers['content-type'] = type
  if (token) headers.authorization = `Bearer ${token}`
  return app.handle(new Request(`http://localhost${path}`, { method, headers, body }))
}

describe('request bodies: JSON by any spelling, anything else 415', () => {
  test('every operation that takes a body: each non-JSON type is 415, each JSON spelling is read', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12))
    const { app } = await makeTestApp({ clock })
    const document = (await (await app.handle(new Request('http://localhost/swagger/json'))).json()) as {
      paths: Record<string, Record<string, { requestBody?: unknown; tags?: string[] }>>
    }
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, operation]) => operation.requestBody && !operation.tags?.includes('Inbound'))
        .map(([method, operation]) => ({
          method: method.toUpperCase(),
          path: path.replace(/\{[^}]+\}/g, ID),
          operation,
        })),
    )
    expect(operations.length).toBeGreaterThan(10)
    const problems: string[] = []
    for (const { method, path } of operations) {
      for (const type of NOT_JSON) {
        // A minute a request: the buckets (sign-up's 5 a minute per IP) are not what is tested.
        clock.advance(61_000)
        const response = await send(app, method, path, type, '{"name":"x"}')
        const body = (await response.json()) as { error?: string; message?: string }
        const expected = `the body must be JSON sent with Content-Type: application/json (${type === null ? 'none was sent' : `got ${JSON.stringify(type)}`})`
        if (response.status !== 415 || body.error !== 'unsupported_media_type' || body.message !== expected)
          problems.push(`${method} ${path} ${type}: ${response.status} ${JSON.stringify(body)}`)
      }
      for (const type of JSON_SPELLINGS) {
        clock.advance(61_000)
        const response = await send(app, method, path, type, '{"name":"x"}')
        if (response.status === 415) problems.push(`${method} ${path} ${type}: 415`)
      }
    }
    expect(problems).toEqual([])
  })

  test('each JSON spelling is read as JSON: a source renamed by every one', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const { source } = await createSource(ctx, owner.organization.id)
    for (const [index, type] of JSON_SPELLINGS.entries()) {
      const name = `Renamed ${index}`
      const response = await send(
        app,
        'PATCH',
        `/api/webhook/sources/${source.id}`,
        type,
        JSON.stringify({ name }),
        owner.token,
      )
      expect({
        type,
        status: response.status,
        name: ((await response.json()) as { name?: string }).name,
      }).toEqual({
        type,
        status: 200,
        name,
      })
    }
  })

  test('a request without a body needs no Content-Type', async () => {
    const { app, ctx } = await makeTestApp()
    const owner = await createSignedInUser(ctx)
    const response = await app.handle(
      new Request('http://localhost/api/auth/logout', {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.token}` },
      }),
    )
    expect(response.status).toBe(204)
  })

  test('the answer: 415 with the error body, the request id and the rate-limit headers', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(
      new Request('http://localhost/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-request-id': 'req-415' },
        body: 'email=a%40example.com&password=x',
      }),
    )
    expect(response.status).toBe(415)
    expect(response.headers.get('content-type')).toContain('application/json')
    expect(response.headers.get('x-ratelimit-limit')).not.toBeNull()
    expect(await response.json()).toEqual({
      error: 'unsupported_media_type',
      message:
        'the body must be JSON sent with Content-Type: application/json (got "application/x-www-form-urlencoded")',
      request_id: 'req-415',
    })
  })
})
