import { beforeAll, describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { createLogger, type LogFields } from '../../src/lib/logger'
import { generateSecret, SECRET_PREFIXES, type SecretKind } from '../../src/lib/secrets'
import { uniqueEmail } from '../helpers/emails'
import { holdsSecret, PERCENT_ENCODINGS } from '../helpers/encodings'
import { createOrganization, createPat, createSession, createSource, createUser } from '../helpers/factories'
import { accessLinesOf, loggedLines, makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 7: a key written percent-encoded in a path (`flwh_%42Fd…`) reaches the same
 * handler as the plain key; no log line may hold it in a usable form, in any encoding, on any
 * route, in the access log or any other line.
 */
beforeAll(() => testDatabase(), 60_000)

function linesOf(ctx: AppContext): LogFields[] {
  return loggedLines(ctx)
}

describe('percent-encoded secrets in paths are masked in every log line', () => {
  for (const [encoding, encode] of PERCENT_ENCODINGS) {
    test(`${encoding}: every route form`, async () => {
      const { app, ctx } = await makeTestApp()
      const organization = await createOrganization(ctx)
      const user = await createUser(ctx, organization.id)
      const session = await createSession(ctx, user.id)
      const pat = await createPat(ctx, user)
      const { apiKey } = await createSource(ctx, organization.id)
      const strangerKey = generateSecret('source_key')
      const secrets = [apiKey, strangerKey, session, pat.token]
      const email = () => uniqueEmail('lead')

      const calls: Array<[string, string, unknown?]> = [
        ['POST', `/api/webhook/lead/${encode(apiKey)}`, { email: email() }],
        ['GET', `/api/webhook/lead/${encode(apiKey)}`],
        ['OPTIONS', `/api/webhook/lead/${encode(apiKey)}`],
        ['POST', `/api/webhook/lead/${encode(strangerKey)}`, { email: email() }],
        ['POST', `/api/webhook/lead/${encode(apiKey)}/`, { email: email() }],
        ['DELETE', `/api/pat/${encode(pat.token)}`],
        ['GET', `/api/webhook/sources/${encode(session)}`],
        ['GET', `/nothing/here/${encode(apiKey)}/${encode(session)}`],
        ['POST', `/api/webhook/lead/x${encode(apiKey)}y`, {}],
      ]
      for (const [method, path, json] of calls) {
        const response = await app.handle(
          request(method, path, { json, headers: { authorization: `Bearer ${session}` } }),
        )
        expect(response.status).toBeLessThan(500)
      }
      const logged = linesOf(ctx)
      // The access line is written after the response is handed over (onAfterResponse).
      const accessLines = await accessLinesOf(ctx, calls.length)
      expect(accessLines.length).toBe(calls.length)
      for (const line of logged) {
        const text = JSON.stringify(line)
        for (const secret of secrets)
          expect({ text, usable: holdsSecret(text, secret) }).toEqual({ text, usable: false })
      }
      // The masked path still says which key it was: prefix, first and last four characters.
      expect(accessLines[0]!.path).toBe(`/api/webhook/lead/flwh_${apiKey.slice(5, 9)}…${apiKey.slice(-4)}`)
    })
  }

  test('a secret sent as X-Request-Id is masked in the access line too', async () => {
    const { app, ctx } = await makeTestApp()
    const secret = generateSecret('pat')
    const response = await app.handle(request('GET', '/nothing', { headers: { 'x-request-id': secret } }))
    expect(response.status).toBe(404)
    const logged = linesOf(ctx)
    const access = await accessLinesOf(ctx, 1)
    expect(access.length).toBe(1)
    for (const line of logged) expect(holdsSecret(JSON.stringify(line), secret)).toBe(false)
  })

  test('the plain key and its encoded form reach the same source: the decoded key is the key', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    const [, encode] = PERCENT_ENCODINGS[0]!
    const response = await app.handle(
      request('POST', `/api/webhook/lead/${encode(apiKey)}`, { json: { email: 'enc@example.com' } }),
    )
    expect(response.status).toBe(200)
    expect((await response.json()).status).toBe('created')
  })
})

describe('the logger masks secrets in every line, whatever the encoding', () => {
  const KINDS = Object.keys(SECRET_PREFIXES) as SecretKind[]
  for (const kind of KINDS) {
    test(`${kind}: access, debug, info, warn, error lines, fields, nested fields and errors`, () => {
      const lines: string[] = []
      const logger = createLogger('debug', (line) => lines.push(line))
      const secret = generateSecret(kind)
      const forms = [secret, ...PERCENT_ENCODINGS.map(([, encode]) => encode(secret))]
      for (const form of forms) {
        logger.access({
          requestId: 'r',
          method: 'GET',
          path: `/a/${form}/b`,
          status: 200,
          durationMs: 1,
          clientIp: '::1',
        })
        logger.debug(`path /a/${form}`)
        logger.info('x', { url: `https://h.test/p?key=${form}` })
        logger.warn('x', { nested: { deeper: [`k=${form}`] } })
        logger.error('x', { error: new Error(`failed for /api/pat/${form}`) })
        // A JSON text with \u escapes inside a logged field.
        logger.error('x', { body: `{"token":"\\u0066${secret.slice(1)}"}` })
      }
      expect(lines.length).toBe(forms.length * 6)
      for (const line of lines)
        expect({ line, usable: holdsSecret(line, secret) }).toEqual({ line, usable: false })
    })
  }
})
