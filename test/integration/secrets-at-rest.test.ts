import { beforeAll, describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { isCardFieldName } from '../../src/lib/card-data'
import { generateSecret } from '../../src/lib/secrets'
import { uniqueEmail } from '../helpers/emails'
import { holdsSecret, JSON_ESCAPES, PERCENT_ENCODINGS } from '../helpers/encodings'
import { createOrganization, createSession, createSource, createUser } from '../helpers/factories'
import { secretNotCardNamed } from '../helpers/secrets'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

/**
 * Issue 15 item 8: credentials are masked before they are stored, after JSON unescaping, so no
 * database dump holds a usable one. Every outcome of the inbound endpoint that writes a row, every
 * place a request can carry a secret (body values at any depth, keys, arrays, headers), every
 * encoding; the rows are read raw from the database, as pg_dump would see them.
 */
beforeAll(() => testDatabase(), 60_000)

async function rawRows(ctx: AppContext, sourceId: string) {
  const logs = await ctx.database.query<Record<string, unknown>>(
    'select * from delivery_logs where source_id = $1',
    [sourceId],
  )
  const leadRows = await ctx.database.query<Record<string, unknown>>(
    'select * from leads where source_id = $1',
    [sourceId],
  )
  return { logs, leads: leadRows }
}

const email = () => uniqueEmail('lead')

/** Where a secret `s` (already encoded as the case wants) is put in the request. */
const PLACES: Array<[string, (s: string) => { body: string; headers?: Record<string, string> }]> = [
  ['a custom field', (s) => ({ body: `{"email":"${email()}","note":"token: ${s} thanks"}` })],
  ['a lead field', (s) => ({ body: `{"email":"${email()}","first_name":"${s}"}` })],
  ['a key', (s) => ({ body: `{"email":"${email()}","${s}":"x"}` })],
  [
    'an array, nested 6 deep',
    (s) => ({ body: `{"email":"${email()}","deep":{"a":[{"b":{"c":[["${s}"]]}}]}}` }),
  ],
  ['attribution', (s) => ({ body: `{"email":"${email()}","attribution":{"utm_term":"${s}"}}` })],
  ['page_url', (s) => ({ body: `{"email":"${email()}","page_url":"https://shop.test/?k=${s}"}` })],
  ['the user agent', (s) => ({ body: `{"email":"${email()}"}`, headers: { 'user-agent': `bot/1 ${s}` } })],
  [
    'the referer',
    (s) => ({ body: `{"email":"${email()}"}`, headers: { referer: `https://shop.test/?t=${s}` } }),
  ],
  ['the origin', (s) => ({ body: `{"email":"${email()}"}`, headers: { origin: `https://${s}.shop.test` } })],
]

/** Bodies for every outcome that stores a delivery log: the secret goes in a custom field. */
const OUTCOMES: Array<[string, (s: string) => { body: string; headers?: Record<string, string> }, number]> = [
  ['created', (s) => ({ body: `{"email":"${email()}","note":"${s}"}` }), 200],
  ['spam (honeypot)', (s) => ({ body: `{"email":"${email()}","_gotcha":"x","note":"${s}"}` }), 200],
  ['error (no contact)', (s) => ({ body: `{"note":"${s}"}` }), 200],
  ['validation_failed', (s) => ({ body: `{"email":"${email()}","first_name":7,"note":"${s}"}` }), 400],
  ['invalid_json', (s) => ({ body: `{"email":"x","note":"${s}"` }), 400],
  ['invalid_body (an array)', (s) => ({ body: `["${s}"]` }), 400],
  ['invalid_content_type', (s) => ({ body: `note=${s}`, headers: { 'content-type': 'text/plain' } }), 400],
]

const KINDS = ['source_key', 'pat', 'session'] as const

async function post(
  app: Awaited<ReturnType<typeof makeTestApp>>['app'],
  apiKey: string,
  call: { body: string; headers?: Record<string, string> },
) {
  return app.handle(
    request('POST', `/api/webhook/lead/${apiKey}`, {
      body: call.body,
      headers: { 'content-type': 'application/json', ...call.headers },
    }),
  )
}

describe('no usable credential is stored', () => {
  for (const [escaping, escapeSecret] of JSON_ESCAPES) {
    test(`body values ${escaping}: every place, every kind of secret`, async () => {
      const { app, ctx } = await makeTestApp()
      const organization = await createOrganization(ctx)
      const { source, apiKey } = await createSource(ctx, organization.id, { spamFilter: false })
      const secrets = KINDS.map((kind) => secretNotCardNamed(() => generateSecret(kind)))
      for (const secret of secrets) {
        for (const [place, build] of PLACES) {
          // Headers carry no JSON escapes: there the secret is written as it is.
          const written = place.startsWith('the ') ? secret : escapeSecret(secret)
          const response = await post(app, apiKey, build(written))
          // A field *named* by a credential is masked too, and a masked name (with "…") is not a
          // valid custom field name: that request is a 400, logged like any other.
          expect({ place, status: response.status }).toEqual({ place, status: place === 'a key' ? 400 : 200 })
        }
      }
      const rows = await rawRows(ctx, source.id)
      expect(rows.logs.length).toBe(secrets.length * PLACES.length)
      for (const row of [...rows.logs, ...rows.leads]) {
        const dump = JSON.stringify(row)
        for (const secret of secrets)
          expect({ dump, usable: holdsSecret(dump, secret) }).toEqual({ dump, usable: false })
      }
    })
  }

  for (const [encoding, encode] of PERCENT_ENCODINGS) {
    test(`percent-encoded in a URL value and in the referer (${encoding})`, async () => {
      const { app, ctx } = await makeTestApp()
      const organization = await createOrganization(ctx)
      const { source, apiKey } = await createSource(ctx, organization.id)
      const secret = generateSecret('source_key')
      await post(app, apiKey, {
        body: JSON.stringify({ email: email(), page_url: `https://shop.test/?key=${encode(secret)}` }),
        headers: { referer: `https://shop.test/?key=${encode(secret)}` },
      })
      const rows = await rawRows(ctx, source.id)
      expect(rows.logs.length).toBe(1)
      for (const row of [...rows.logs, ...rows.leads])
        expect(holdsSecret(JSON.stringify(row), secret)).toBe(false)
    })
  }

  for (const [outcome, build, status] of OUTCOMES) {
    test(`outcome ${outcome}: the logged body holds no usable credential, plain or \\u-escaped`, async () => {
      const { app, ctx } = await makeTestApp()
      const organization = await createOrganization(ctx)
      const { source, apiKey } = await createSource(ctx, organization.id)
      const secrets = KINDS.map((kind) => generateSecret(kind))
      for (const secret of secrets) {
        for (const [, escapeSecret] of JSON_ESCAPES) {
          const response = await post(app, apiKey, build(escapeSecret(secret)))
          expect({ outcome, status: response.status }).toEqual({ outcome, status })
        }
      }
      const rows = await rawRows(ctx, source.id)
      expect(rows.logs.length).toBe(secrets.length * JSON_ESCAPES.length)
      for (const row of [...rows.logs, ...rows.leads]) {
        const dump = JSON.stringify(row)
        for (const secret of secrets)
          expect({ dump, usable: holdsSecret(dump, secret) }).toEqual({ dump, usable: false })
      }
    })
  }

  test('the issue’s case: "\\u0066l_pat_…" in a lead body, read back from GET …/logs/{id} and from the row', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const owner = await createUser(ctx, organization.id)
    const session = await createSession(ctx, owner.id)
    const { source, apiKey } = await createSource(ctx, organization.id)
    const pat = generateSecret('pat')
    const body = `{"email":"${email()}","note":"\\u0066${pat.slice(1)}"}`
    expect((await post(app, apiKey, { body })).status).toBe(200)
    const [row] = (await rawRows(ctx, source.id)).logs
    expect(holdsSecret(JSON.stringify(row), pat)).toBe(false)
    // Stored as valid JSON with the value masked: the body is still readable as the lead sent it.
    expect(JSON.parse(String(row!.body)).note).toBe(`fl_pat_${pat.slice(7, 11)}…${pat.slice(-4)}`)
    const single = await app.handle(
      request('GET', `/api/webhook/sources/${source.id}/logs/${row!.id}`, { token: session }),
    )
    expect(single.status).toBe(200)
    const entry = await single.json()
    expect(holdsSecret(JSON.stringify(entry), pat)).toBe(false)
    expect(entry.body.note).toBe(`fl_pat_${pat.slice(7, 11)}…${pat.slice(-4)}`)
  })

  test('a field named by a secret that reads as card data is dropped as card data, not stored', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const { source, apiKey } = await createSource(ctx, organization.id)
    let secret = generateSecret('source_key')
    while (!isCardFieldName(secret)) secret = generateSecret('source_key')
    const response = await post(app, apiKey, { body: `{"email":"${email()}","${secret}":"x"}` })
    expect(response.status).toBe(200)
    expect((await response.json()).status).toBe('created')
    const rows = await rawRows(ctx, source.id)
    expect(rows.leads.map((lead) => lead.custom_fields)).toEqual([{}])
    for (const row of [...rows.logs, ...rows.leads])
      expect(holdsSecret(JSON.stringify(row), secret)).toBe(false)
  })

  test('a secret nested deeper than the walk goes (100 levels) is not stored either', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const { source, apiKey } = await createSource(ctx, organization.id)
    const secret = generateSecret('pat')
    const deep = `${'{"a":'.repeat(100)}"${secret}"${'}'.repeat(100)}`
    const response = await post(app, apiKey, { body: `{"email":"${email()}","deep":${deep}}` })
    // The input guard refuses nesting past 32 levels (docs/security.md); the refusal's log entry
    // must not hold the secret either.
    expect(response.status).toBe(400)
    expect((await response.json()).error).toBe('invalid_body')
    const rows = await rawRows(ctx, source.id)
    expect(rows.leads.length).toBe(0)
    expect(rows.logs.length).toBe(1)
    for (const row of [...rows.logs, ...rows.leads])
      expect(holdsSecret(JSON.stringify(row), secret)).toBe(false)
  })

  test('a body without secrets is stored exactly as sent', async () => {
    const { app, ctx } = await makeTestApp()
    const organization = await createOrganization(ctx)
    const { source, apiKey } = await createSource(ctx, organization.id)
    const body = `{ "email" : "${email()}",\n "note": "caf\\u00e9 100% \\"ok\\"" }`
    expect((await post(app, apiKey, { body })).status).toBe(200)
    const [row] = (await rawRows(ctx, source.id)).logs
    expect(row!.body).toBe(body)
  })
})
