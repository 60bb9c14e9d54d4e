import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { createApp } from '../../src/app'
import type { AppContext } from '../../src/context'
import { createOrganization, createSource } from '../helpers/factories'
import { loggedLines, makeTestApp } from '../helpers/test-app'

/**
 * A client that goes away before its body has arrived (a tab closed, a phone that lost its network,
 * a sender's own timeout) is not the server's error. Before, the webhook POST logged it as
 * `unhandled error` and `server error` at level error with an access line of 500 (an alert on
 * error lines or on the 5xx rate paged for every such client), and the management routes answered
 * it 400 `invalid_body`. Now every route that reads a body logs it as 499 ("client closed request",
 * nginx's convention) in the access line and writes no error line. The class: every route of the
 * app that takes a body (the API's and the dashboard's forms), over a real socket that sends the
 * head and part of the body and closes.
 */
interface BodyRoute {
  method: string
  path: string
  /** A dashboard form (urlencoded), else JSON. */
  form: boolean
}

function head({ method, path, form }: BodyRoute, port: number): string {
  const type = form ? 'application/x-www-form-urlencoded' : 'application/json'
  return `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: ${type}\r\nContent-Length: 400\r\n\r\n`
}

/**
 * The status a route answers with before any of its body has arrived (the head only, a body of 400
 * bytes announced), or null when it waits for the body. An anonymous request to a route that
 * authenticates before it reads its body is answered at once (`regenerate-key`: 401): that answer
 * stands when the client then goes.
 */
function answerWithoutBody(port: number, route: BodyRoute): Promise<number | null> {
  return new Promise((resolve, reject) => {
    let answer = ''
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head(route, port))
      setTimeout(() => socket.destroy(), 300)
    })
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1')
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(answer ? Number(answer.split(' ')[1]) : null))
  })
}

function sendPartAndClose(port: number, route: BodyRoute): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head(route, port) + (route.form ? 'name=par' : '{"name": "par'))
      setTimeout(() => socket.destroy(), 150)
    })
    socket.on('error', reject)
    socket.on('close', () => resolve())
  })
}

describe('a client that closes the connection before its body has arrived', () => {
  let ctx: AppContext
  let server: { stop(force?: boolean): unknown }
  let port: number
  const routes: BodyRoute[] = []

  beforeAll(async () => {
    const built = await makeTestApp({ env: { TRUST_PROXY: '' } })
    ctx = built.ctx
    const organization = await createOrganization(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    // every route of the app that takes a body, from its own route table (the dashboard's forms
    // included, which the published document leaves out)
    const app = createApp(ctx)
    for (const route of app.routes) {
      if (!['POST', 'PUT', 'PATCH'].includes(route.method)) continue
      const path = route.path
        .replace(':api_key', apiKey)
        .replace(/:[a-z_]+/g, '01900000-0000-7000-8000-000000000000')
      routes.push({ method: route.method, path, form: route.path.startsWith('/app/') })
    }
    app.listen({ port: 0, hostname: '127.0.0.1' })
    server = app.server!
    port = app.server!.port!
  })
  afterAll(() => {
    server.stop(true)
  })

  test('the route table has the webhook POST, the management writes and the dashboard forms', () => {
    const names = routes.map((route) => `${route.method} ${route.path.split('/').slice(0, 4).join('/')}`)
    expect(names).toContain('POST /api/webhook/lead')
    expect(names).toContain('POST /api/webhook/sources')
    expect(names).toContain('POST /api/auth/login')
    expect(names).toContain('POST /app/sources')
    expect(routes.length).toBeGreaterThanOrEqual(25)
  })

  test('every body route: access line 499 (or the answer it gives without a body), no error line', async () => {
    const outcomes: string[] = []
    const expected: string[] = []
    for (const route of routes) {
      const early = await answerWithoutBody(port, route)
      expected.push(`${route.method} ${route.path}: ${early ?? 499}, errors []`)
      const before = loggedLines(ctx).length
      await sendPartAndClose(port, route)
      // the access line comes once the aborted read has failed
      const deadline = performance.now() + 3_000
      let lines = loggedLines(ctx).slice(before)
      while (
        !lines.some((line) => line.msg === 'request' && line.method === route.method) &&
        performance.now() < deadline
      ) {
        await Bun.sleep(10)
        lines = loggedLines(ctx).slice(before)
      }
      // the access line shortens a webhook key to its ends (`flwh_SkR7…C8xw`): matched by what precedes `…`
      const access = lines.find(
        (line) =>
          line.msg === 'request' &&
          line.method === route.method &&
          route.path.startsWith(String(line.path).split('…')[0]!),
      )
      const errorLines = lines.filter((line) => line.level === 'error').map((line) => line.msg)
      outcomes.push(
        `${route.method} ${route.path}: ${access?.status ?? 'no access line'}, errors [${errorLines}]`,
      )
    }
    expect(outcomes).toEqual(expected)
    // most routes read their body before they answer: the rule is not vacuous
    expect(expected.filter((line) => line.includes(': 499,')).length).toBeGreaterThanOrEqual(10)
    const health = await fetch(`http://127.0.0.1:${port}/healthz`)
    expect(health.status).toBe(200)
  }, 60_000)
})
