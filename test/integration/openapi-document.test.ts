import { beforeAll, describe, expect, test } from 'bun:test'
import { ERROR_CODES, type ErrorCode } from '../../src/lib/errors'
import { errorCodesFor, finalizeDocument } from '../../src/lib/openapi-document'
import { EVENT_TYPES } from '../../src/modules/webhook-endpoints/model'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

type Schema = Record<string, unknown>
interface Response {
  headers?: Record<string, { $ref: string }>
  content?: Record<string, { schema?: Schema; examples?: Record<string, { value: Record<string, unknown> }> }>
}
interface Operation {
  operationId: string
  tags: string[]
  security: unknown[]
  requestBody?: { required: boolean; content: Record<string, { schema: { $ref?: string } }> }
  responses: Record<string, Response>
}
interface Document {
  openapi: string
  servers: Array<{ url: string }>
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, Schema>; headers: Record<string, unknown> }
  webhooks?: unknown
}

const PUBLIC_OPERATIONS = [
  'checkLiveness',
  'checkReadiness',
  'receiveLead',
  'describeWebhook',
  'getTrackerScript',
  'signUp',
  'logIn',
]

async function publishedDocument(env: Record<string, string> = {}) {
  const { app } = await makeTestApp({ env })
  const response = await app.handle(request('GET', '/swagger/json'))
  expect(response.status).toBe(200)
  return (await response.json()) as Document
}

function operations(document: Document): Array<[string, string, Operation]> {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(
      ([method, operation]) => [path, method, operation] as [string, string, Operation],
    ),
  )
}

function walk(node: unknown, visit: (object: Schema, at: string) => void, at = ''): void {
  if (Array.isArray(node)) {
    for (const [index, child] of node.entries()) walk(child, visit, `${at}/${index}`)
  } else if (node && typeof node === 'object') {
    visit(node as Schema, at)
    for (const [key, value] of Object.entries(node)) walk(value, visit, `${at}/${key}`)
  }
}

describe('the published OpenAPI document', () => {
  test('3.1, servers from PUBLIC_BASE_URL, the named schemas an integrator looks for', async () => {
    const document = await publishedDocument({ PUBLIC_BASE_URL: 'https://leads.acme.test/' })
    expect(document.openapi).toBe('3.1.0')
    expect(document.servers.map((server) => server.url)).toEqual(['https://leads.acme.test'])
    for (const name of [
      'Lead',
      'Source',
      'DeliveryLogEntry',
      'SourceHealth',
      'PersonalAccessToken',
      'Member',
      'Error',
    ]) {
      expect({ name, type: document.components.schemas[name]?.type }).toEqual({ name, type: 'object' })
    }
  })

  test('every operation: a unique camelCase operationId, security [] when public, named request bodies that refuse unknown fields', async () => {
    const document = await publishedDocument()
    const all = operations(document)
    const ids = all.map(([, , operation]) => operation.operationId)
    expect(new Set(ids).size).toBe(ids.length)
    for (const [path, method, operation] of all) {
      expect({ path, method, id: /^[a-z][A-Za-z]+$/.test(operation.operationId) }).toEqual({
        path,
        method,
        id: true,
      })
      if (PUBLIC_OPERATIONS.includes(operation.operationId)) expect(operation.security).toEqual([])
      else expect(operation.security).toEqual([{ bearerAuth: [] }, { apiKeyAuth: [] }])
      if (operation.requestBody && operation.operationId !== 'receiveLead') {
        expect(Object.keys(operation.requestBody.content)).toEqual(['application/json'])
        const reference = operation.requestBody.content['application/json']!.schema.$ref!
        const schema = document.components.schemas[reference.split('/').pop()!]!
        expect({
          operation: operation.operationId,
          additionalProperties: schema.additionalProperties,
        }).toEqual({
          operation: operation.operationId,
          additionalProperties: false,
        })
        expect(operation.requestBody.required).toBe(operation.operationId !== 'regenerateSourceKey')
      }
    }
    expect(ids).toEqual(
      expect.arrayContaining(['receiveLead', 'listSources', 'createSource', 'regenerateSourceKey']),
    )
  })

  test('no schema internals: integers are integers, no nullable, no media types named "type", no content on 204/304', async () => {
    const document = await publishedDocument()
    const problems: string[] = []
    walk(document, (object, at) => {
      if ('nullable' in object) problems.push(`nullable at ${at}`)
      if (object.format === 'integer' || object.format === 'numeric') problems.push(`numeric string at ${at}`)
    })
    for (const [path, method, operation] of operations(document)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        if (status === '204' || status === '304') {
          if (response.content) problems.push(`${method} ${path} ${status} has content`)
        } else if (!response.content) problems.push(`${method} ${path} ${status} has no content`)
        for (const type of Object.keys(response.content ?? {})) {
          if (!type.includes('/')) problems.push(`${method} ${path} ${status}: media type ${type}`)
        }
      }
    }
    expect(problems).toEqual([])
  })

  test('response headers where they are sent: request id everywhere, limits, Retry-After on 429, WWW-Authenticate on 401', async () => {
    const document = await publishedDocument()
    for (const [path, method, operation] of operations(document)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const names = Object.keys(response.headers ?? {})
        const route = `${method} ${path} ${status}`
        expect({ route, requestId: names.includes('X-Request-Id') }).toEqual({ route, requestId: true })
        const probe = path === '/healthz' || path === '/readyz'
        expect({ route, limits: names.includes('X-RateLimit-Remaining') }).toEqual({ route, limits: !probe })
        if (status === '429') expect(names).toContain('Retry-After')
        if (status === '401') expect(names).toContain('WWW-Authenticate')
      }
    }
    const tracker = document.paths['/api/webhook/tracker.js']!.get!.responses
    expect(Object.keys(tracker['200']!.content!)).toEqual(['application/javascript'])
    expect(Object.keys(tracker['200']!.headers!)).toEqual(expect.arrayContaining(['ETag', 'Cache-Control']))
    expect(Object.keys(tracker['304']!.headers!)).toEqual(expect.arrayContaining(['ETag', 'Cache-Control']))
  })

  test('error examples: every code of the status and kind of route, none of another status', async () => {
    const document = await publishedDocument()
    for (const [path, method, operation] of operations(document)) {
      const where = operation.tags.includes('Inbound') ? 'inbound' : 'management'
      for (const [status, response] of Object.entries(operation.responses)) {
        const json = response.content?.['application/json']
        const schema = String(json?.schema?.$ref ?? '')
        if (!schema.endsWith('/Error') && !schema.endsWith('/RateLimitedError')) continue
        const codes = Object.keys(json!.examples ?? {}) as ErrorCode[]
        const route = `${method} ${path} ${status}`
        expect({ route, codes }).toEqual({ route, codes: errorCodesFor(Number(status), where) })
        for (const code of codes) {
          expect(ERROR_CODES[code].status as number).toBe(Number(status))
          expect(json!.examples![code]!.value.error).toBe(code)
        }
      }
    }
  })

  test('the inbound POST shows an example of every outcome', async () => {
    const document = await publishedDocument()
    const examples =
      document.paths['/api/webhook/lead/{api_key}']!.post!.responses['200']!.content!['application/json']!
        .examples!
    expect(Object.values(examples).map((example) => example.value.status)).toEqual([
      'created',
      'updated',
      'spam',
      'error',
    ])
  })
})

describe('the published webhooks section', () => {
  test('every outbound event type, with its payload schema and the Standard Webhooks headers', async () => {
    const document = (await publishedDocument()) as unknown as {
      webhooks: Record<
        string,
        {
          post: {
            operationId: string
            parameters: Array<{ name: string }>
            requestBody: { content: Record<string, { schema: { properties: { type: { const: string } } } }> }
          }
        }
      >
    }
    expect(Object.keys(document.webhooks).sort()).toEqual([...EVENT_TYPES].sort())
    for (const [type, item] of Object.entries(document.webhooks)) {
      expect(item.post.requestBody.content['application/json']!.schema.properties.type.const).toBe(type)
      expect(item.post.parameters.map((parameter) => parameter.name)).toEqual([
        'webhook-id',
        'webhook-timestamp',
        'webhook-signature',
      ])
      expect(item.post.operationId).toMatch(/^[a-z][A-Za-z]*Event$/)
    }
  })
})

describe('finalizeDocument', () => {
  const generated = {
    openapi: '3.1.0',
    paths: { '/x': { get: { operationId: 'getX', responses: { '200': { description: 'ok' } } } } },
  }

  test('publishes outbound event payloads as OpenAPI 3.1 webhooks when given, and nothing otherwise', () => {
    const webhooks = {
      'lead.created': { post: { operationId: 'leadCreated', responses: { '200': { description: 'ok' } } } },
    }
    expect(finalizeDocument(generated, { publicBaseUrl: 'https://a.test' })).not.toHaveProperty('webhooks')
    expect(finalizeDocument(generated, { publicBaseUrl: 'https://a.test', webhooks })).toMatchObject({
      webhooks,
    })
  })

  test('refuses an operation without a readable operationId', () => {
    const unnamed = { paths: { '/x': { get: { responses: {} } } } }
    expect(() => finalizeDocument(unnamed, { publicBaseUrl: 'https://a.test' })).toThrow(/operationId/)
  })
})

describe('the error codes', () => {
  test('a closed set of snake_case codes, each with one error status and an example message', () => {
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      expect({
        code,
        snake: /^[a-z]+(_[a-z]+)*$/.test(code),
        error: entry.status >= 400 && entry.status < 600,
      }).toEqual({
        code,
        snake: true,
        error: true,
      })
      expect(entry.example.length).toBeGreaterThan(5)
    }
  })
})
