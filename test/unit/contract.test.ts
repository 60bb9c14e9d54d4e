import { describe, expect, test } from 'bun:test'
import { Contract, type ContractDocument } from '../helpers/contract'

// A small document in the shape finalizeDocument publishes: a named schema, a required header, an
// open error body, an empty 204.
const document: ContractDocument = {
  paths: {
    '/things/{id}': {
      get: {
        responses: {
          '200': {
            headers: { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } },
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
          },
          '404': {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['error'],
                  properties: { error: { type: 'string' } },
                  additionalProperties: true,
                },
              },
            },
          },
        },
      },
      delete: { responses: { '204': {} } },
    },
    '/things/special': { get: { responses: { '200': { content: { 'text/plain': {} } } } } },
  },
  components: {
    headers: { 'X-Request-Id': { required: true, schema: { type: 'string' } } },
    schemas: {
      Thing: {
        type: 'object',
        required: ['id', 'count'],
        properties: { id: { type: 'string', format: 'uuid' }, count: { type: 'integer' } },
      },
    },
  },
}

const ID = '01970c6e-5b2a-7cc1-8f3e-6d1c2b3a4f50'
const json = (body: unknown, status = 200, headers: Record<string, string> = { 'x-request-id': 'r' }) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } })

describe('the contract check', () => {
  const contract = new Contract(document)
  const get = new Request(`http://localhost/things/${ID}`)
  const cases: Array<[string, Request, Response, RegExp | null]> = [
    ['a conforming body', get, json({ id: ID, count: 1 }), null],
    ['an undocumented status', get, json({ error: 'x' }, 409), /status not documented/],
    ['an extra field', get, json({ id: ID, count: 1, secret: 'x' }), /must NOT have additional properties/],
    ['a missing field', get, json({ id: ID }), /must have required property 'count'/],
    ['a wrong type', get, json({ id: ID, count: '1' }), /must be integer/],
    ['a bad format', get, json({ id: 'nope', count: 1 }), /must match format "uuid"/],
    ['a missing required header', get, json({ id: ID, count: 1 }, 200, {}), /header X-Request-Id missing/],
    ['an error body with fields of its own', get, json({ error: 'not_found', extra: 1 }, 404), null],
    [
      'an undocumented media type',
      get,
      new Response('x', { headers: { 'content-type': 'text/html', 'x-request-id': 'r' } }),
      /content type text\/html not documented/,
    ],
    [
      'an empty 204',
      new Request(`http://localhost/things/${ID}`, { method: 'DELETE' }),
      new Response(null, { status: 204 }),
      null,
    ],
    [
      'a body on a documented-empty response',
      new Request(`http://localhost/things/${ID}`, { method: 'DELETE' }),
      new Response('{}', { status: 204 }),
      /documented without a body/,
    ],
    [
      'a literal path before a template',
      new Request('http://localhost/things/special'),
      new Response('x', { headers: { 'content-type': 'text/plain' } }),
      null,
    ],
    ['a path the document does not describe', new Request('http://localhost/else'), json({}, 418), null],
  ]
  for (const [label, request, response, expected] of cases) {
    test(label, async () => {
      const outcome = await contract.check(request, response).then(
        () => null,
        (error: Error) => error.message,
      )
      if (expected === null) expect(outcome).toBeNull()
      else expect(outcome).toMatch(expected)
    })
  }
})
