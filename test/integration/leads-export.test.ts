import { beforeAll, describe, expect, test } from 'bun:test'
import { leads } from '../../src/db/schema'
import { newId } from '../../src/lib/ids'
import { LEAD_CSV_COLUMNS } from '../../src/modules/leads/model'
import { LeadsRepository } from '../../src/modules/leads/repository'
import { CSV_EXPORT_BATCH_ROWS } from '../../src/modules/leads/service'
import { runCommonRouteTests } from '../helpers/common-route-tests'
import { csvRecords, parseCsv } from '../helpers/csv'
import { createLead, createSession, createSignedInUser, createSource, createUser } from '../helpers/factories'
import { call, makeSignedInApp, makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

type App = Awaited<ReturnType<typeof makeTestApp>>['app']
const EXPORT = '/api/v2/leads/export.csv'
const LIST = '/api/v2/leads'

async function exportCsv(app: App, token: string, query = '') {
  const response = await call(app, token, 'GET', `${EXPORT}${query ? `?${query}` : ''}`)
  expect(response.status).toBe(200)
  return { response, text: await response.text() }
}

/** Every id the JSON list returns for the same query: the export must match it exactly. */
async function listedIds(app: App, token: string, query: string): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  do {
    const path: string = `${LIST}?limit=200${query ? `&${query}` : ''}${cursor ? `&cursor=${cursor}` : ''}`
    const body = await (await call(app, token, 'GET', path)).json()
    for (const lead of body.data) ids.push(lead.lead_id)
    cursor = body.next_cursor
  } while (cursor)
  return ids
}

describe('GET /api/v2/leads/export.csv', () => {
  test('an attachment of text/csv with the API headers; one row per lead, fields as the JSON list', async () => {
    const { app, ctx, token, organization } = await makeSignedInApp()
    const { source } = await createSource(ctx, organization.id)
    await createLead(ctx, (await createSignedInUser(ctx)).organization.id)
    await createLead(ctx, organization.id, { email: 'old@example.com' })
    await createLead(ctx, organization.id, {
      sourceId: source.id,
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: 'ada@example.com',
      phoneRaw: '020 7946 0958',
      phoneE164: '+442079460958',
      status: 'new',
      customFields: { company: 'Engines, Ltd', note: 'says "hi"' },
      attribution: { utm_source: 'newsletter' },
    })
    const { response, text } = await exportCsv(app, token)
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8')
    expect(response.headers.get('content-disposition')).toMatch(
      /^attachment; filename="leads-\d{8}-\d{4}\.csv"$/,
    )
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(response.headers.get('x-request-id')).toBeTruthy()
    expect(response.headers.get('x-ratelimit-limit')).toBe('100')

    expect(parseCsv(text)[0]).toEqual([...LEAD_CSV_COLUMNS])
    const listed = (await (await call(app, token, 'GET', LIST)).json()).data as Array<Record<string, unknown>>
    const records = csvRecords(text)
    expect(records).toHaveLength(2)
    // Every column, for every lead: strings as in the JSON (the E.164 phone behind its guard
    // apostrophe), nulls empty, objects as JSON text.
    records.forEach((record, index) => {
      const lead = listed[index]!
      for (const column of LEAD_CSV_COLUMNS) {
        const value = lead[column]
        const expected = value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value)
        const guarded = /^[=+\-@\t\r]/.test(expected) ? `'${expected}` : expected
        expect({ column, value: record[column] }).toEqual({ column, value: guarded })
      }
    })
    expect(JSON.parse(records[0]!.custom_fields!)).toEqual({ company: 'Engines, Ltd', note: 'says "hi"' })
    expect(records[0]!.phone_e164).toBe("'+442079460958")
  })

  test('a header row only when nothing matches', async () => {
    const { app, token } = await makeSignedInApp()
    const { text } = await exportCsv(app, token)
    expect(text).toBe(`${LEAD_CSV_COLUMNS.join(',')}\r\n`)
  })

  // Every text field a web form fills, with every character a spreadsheet reads as a formula,
  // and every character that needs quoting.
  const hostile = [
    ['=1+2', "'=1+2"],
    ['+cmd|calc', "'+cmd|calc"],
    ['-2+3', "'-2+3"],
    ['@SUM(A1)', "'@SUM(A1)"],
    ['\t=1', "'\t=1"],
    ['\r=1', "'\r=1"],
    ['=HYPERLINK("http://x","y")', `'=HYPERLINK("http://x","y")`],
    ['a,b', 'a,b'],
    ['say "hi"', 'say "hi"'],
    ['two\nlines', 'two\nlines'],
    ['cr\r\nlf', 'cr\r\nlf'],
    ['plain a=b', 'plain a=b'],
  ] as const
  for (const field of ['firstName', 'lastName', 'status', 'phoneRaw'] as const) {
    test(`${field}: formula characters are neutralised and special characters quoted`, async () => {
      const { app, ctx, token, organization } = await makeSignedInApp()
      for (const [value] of hostile) {
        await createLead(ctx, organization.id, { [field]: field === 'status' ? value.slice(0, 50) : value })
      }
      const { text } = await exportCsv(app, token)
      const column = {
        firstName: 'first_name',
        lastName: 'last_name',
        status: 'status',
        phoneRaw: 'phone_raw',
      }[field]
      const cells = csvRecords(text).map((record) => record[column])
      expect(cells).toEqual(hostile.map(([, expected]) => expected).reverse())
      // No cell, quoted or not, begins with a formula character once parsed.
      for (const cell of cells) expect(cell).not.toMatch(/^[=+\-@\t\r]/)
    })
  }

  test('an e-mail with formula characters and a custom field holding a formula are neutralised', async () => {
    const { app, ctx, token, organization } = await makeSignedInApp()
    await createLead(ctx, organization.id, { email: '@evil@example.com', customFields: { '=x': '=y' } })
    const [record] = csvRecords((await exportCsv(app, token)).text)
    expect(record!.email).toBe("'@evil@example.com")
    // JSON text starts with "{": safe as it is, and still parses.
    expect(JSON.parse(record!.custom_fields!)).toEqual({ '=x': '=y' })
  })

  test('source_id, q and created_after filter and combine exactly as the JSON list does', async () => {
    const { app, ctx, token, organization } = await makeSignedInApp()
    const a = (await createSource(ctx, organization.id)).source
    const b = (await createSource(ctx, organization.id)).source
    const day = (n: number) => new Date(Date.UTC(2026, 0, n))
    await createLead(ctx, organization.id, { sourceId: a.id, email: 'bob@acme.io', createdAt: day(1) })
    await createLead(ctx, organization.id, { sourceId: a.id, email: 'carol@acme.io', createdAt: day(5) })
    await createLead(ctx, organization.id, { sourceId: b.id, email: 'dan@acme.io', createdAt: day(6) })
    await createLead(ctx, organization.id, {
      sourceId: b.id,
      email: null,
      phoneRaw: '+44 20 7946 0958',
      phoneE164: '+442079460958',
      createdAt: day(7),
    })
    const queries = [
      '',
      `source_id=${a.id}`,
      `source_id=${b.id.toUpperCase()}`,
      'q=acme',
      'q=CAROL%40ACME.IO',
      'q=7946',
      `created_after=${day(4).toISOString()}`,
      `source_id=${a.id}&created_after=${day(4).toISOString()}`,
      `source_id=${b.id}&q=acme`,
      'q=nobody',
    ]
    for (const query of queries) {
      const exported = csvRecords((await exportCsv(app, token, query)).text).map((record) => record.lead_id)
      const listed = await listedIds(app, token, query)
      expect({ query, exported }).toEqual({ query, exported: listed })
    }
    expect(csvRecords((await exportCsv(app, token, 'q=acme')).text)).toHaveLength(3)
  })

  test('no row limit: more rows than one batch arrive complete, in order, over several chunks', async () => {
    const { app, ctx, token, organization } = await makeSignedInApp()
    const total = CSV_EXPORT_BATCH_ROWS * 2 + 37
    const ids: string[] = []
    for (let start = 0; start < total; start += 500) {
      const rows = Array.from({ length: Math.min(500, total - start) }, (_, offset) => {
        const id = newId()
        ids.push(id)
        return {
          id,
          organizationId: organization.id,
          email: `bulk-${start + offset}-${id}@example.com`,
          emailNormalized: `bulk-${start + offset}-${id}@example.com`,
        }
      })
      await ctx.db.insert(leads).values(rows)
    }
    const response = await call(app, token, 'GET', EXPORT)
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ''
    let chunks = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      chunks++
      text += decoder.decode(value, { stream: true })
    }
    const exported = csvRecords(text).map((record) => record.lead_id)
    expect(exported).toHaveLength(total)
    expect(exported).toEqual([...ids].sort().reverse())
    // The header, then one chunk per batch: the rows were never gathered into one buffer.
    expect(chunks).toBeGreaterThanOrEqual(Math.ceil(total / CSV_EXPORT_BATCH_ROWS))
  })

  test("a filter holds across pages: every page of a source's leads, none of another, each row as the JSON list", async () => {
    const { app, ctx, token, organization } = await makeSignedInApp()
    const a = (await createSource(ctx, organization.id)).source
    const b = (await createSource(ctx, organization.id)).source
    // Interleaved, so every page of the keyset walk skips rows of the other source.
    const total = CSV_EXPORT_BATCH_ROWS * 3 + 11
    const rows = Array.from({ length: total }, (_, index) => {
      const id = newId()
      return {
        id,
        organizationId: organization.id,
        sourceId: index % 3 === 0 ? b.id : a.id,
        email: `paged-${index}-${id}@example.com`,
        emailNormalized: `paged-${index}-${id}@example.com`,
        firstName: index % 7 === 0 ? '=formula' : `Name ${index}`,
        customFields: { index },
      }
    })
    for (let start = 0; start < total; start += 500)
      await ctx.db.insert(leads).values(rows.slice(start, start + 500))
    const { text } = await exportCsv(app, token, `source_id=${a.id}`)
    const records = csvRecords(text)
    const expected = rows.filter((row) => row.sourceId === a.id)
    expect(expected.length).toBeGreaterThan(CSV_EXPORT_BATCH_ROWS * 2)
    expect(records.map((record) => record.lead_id)).toEqual(await listedIds(app, token, `source_id=${a.id}`))
    expect(records.map((record) => record.lead_id)).toEqual(
      expected
        .map((row) => row.id)
        .sort()
        .reverse(),
    )
    const byId = new Map(expected.map((row) => [row.id, row]))
    for (const record of records) {
      const row = byId.get(record.lead_id!)!
      expect({
        source: record.source_id,
        email: record.email,
        name: record.first_name,
        custom: JSON.parse(record.custom_fields!),
      }).toEqual({
        source: a.id,
        email: row.email,
        name: row.firstName.startsWith('=') ? `'${row.firstName}` : row.firstName,
        custom: row.customFields,
      })
    }
  })

  test('the stream pulls a page from the database only when the client has read the previous one', async () => {
    // Counts the service's page queries: the leads service is built on a repository that counts.
    let queries = 0
    class CountingRepository extends LeadsRepository {
      override exportPage(...args: Parameters<LeadsRepository['exportPage']>) {
        queries++
        return super.exportPage(...args)
      }
    }
    const { app, ctx, token, organization } = await makeSignedInApp({
      parts: (context) => ({ leadsRepository: new CountingRepository(context) }),
    })
    const pages = 6
    for (let page = 0; page < pages; page++) {
      await ctx.db.insert(leads).values(
        Array.from({ length: CSV_EXPORT_BATCH_ROWS }, () => {
          const id = newId()
          return {
            id,
            organizationId: organization.id,
            email: `${id}@example.com`,
            emailNormalized: `${id}@example.com`,
          }
        }),
      )
    }
    const response = await call(app, token, 'GET', EXPORT)
    const reader = response.body!.getReader()
    await reader.read()
    await reader.read()
    // However long the client waits, nothing more is read from the database for it.
    await Bun.sleep(200)
    expect(queries).toBeLessThanOrEqual(2)
    let rows = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      rows += new TextDecoder().decode(value).split('\r\n').length - 1
    }
    // Each query asks for one row more than a page, so the last full page also says "no more".
    expect(queries).toBe(pages)
    expect(rows).toBe(pages * CSV_EXPORT_BATCH_ROWS - CSV_EXPORT_BATCH_ROWS)
  })

  test('invalid filters are a JSON 400 before any CSV is sent', async () => {
    const { app, token } = await makeSignedInApp()
    for (const query of ['source_id=nope', 'created_after=yesterday', 'q=', 'limit=abc&source_id=1']) {
      const response = await call(app, token, 'GET', `${EXPORT}?${query}`)
      expect({ query, status: response.status }).toEqual({ query, status: 400 })
      expect(response.headers.get('content-type')).toContain('application/json')
      expect((await response.json()).error).toBe('validation_failed')
    }
  })

  test('every role may export (leads.read); a PAT needs leads.read in its scopes', async () => {
    const { app, ctx } = await makeTestApp()
    const free = await createSignedInUser(ctx, { plan: 'free' })
    await createLead(ctx, free.organization.id, { email: 'viewer-sees@example.com' })
    for (const role of ['viewer', 'member', 'admin', 'owner'] as const) {
      const user = await createUser(ctx, free.organization.id, { role })
      const { text } = await exportCsv(app, await createSession(ctx, user.id))
      expect(csvRecords(text).map((record) => record.email)).toEqual(['viewer-sees@example.com'])
    }
  })

  test('the OpenAPI document describes the export: text/csv, the filters, the error statuses', async () => {
    const { app } = await makeTestApp()
    const spec = await (await app.handle(request('GET', '/swagger/json'))).json()
    const operation = spec.paths[EXPORT]?.get
    expect(operation.tags).toEqual(['Leads'])
    expect(operation.summary).toBe('Export leads as CSV')
    expect(Object.keys(operation.responses[200].content)).toEqual(['text/csv'])
    expect(operation.responses[200].content['text/csv'].schema).toMatchObject({ type: 'string' })
    expect(Object.keys(operation.responses[200].headers)).toEqual(
      expect.arrayContaining(['Content-Disposition', 'Cache-Control', 'X-Request-Id']),
    )
    for (const status of ['400', '401', '403', '429']) expect(operation.responses[status]).toBeDefined()
    const names = operation.parameters.map((parameter: { name: string }) => parameter.name).sort()
    expect(names).toEqual(['created_after', 'q', 'source_id'])
  })
})

runCommonRouteTests({ name: `GET ${EXPORT}`, method: 'GET', path: () => EXPORT, permission: 'leads.read' })
