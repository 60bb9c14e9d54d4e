import { beforeAll, describe, expect, test } from 'bun:test'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

interface Operation {
  tags?: string[]
  summary?: string
  security?: Array<Record<string, string[]>>
  responses?: Record<string, { content?: Record<string, { schema?: { examples?: unknown[] } }> }>
  requestBody?: { content?: Record<string, { schema?: { examples?: unknown[]; properties?: object } }> }
}

const PROTECTED: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { apiKeyAuth: [] }]

// [method, path, secured, statuses, has a request body]; 400 and 413 are the input guard's, on every
// route, and 415 on every POST, PUT, PATCH and DELETE (a body that is not JSON)
const ROUTES: Array<[string, string, boolean, number[], boolean]> = [
  ['post', '/api/auth/signup', false, [201, 400, 403, 409, 413, 415, 429, 503], true],
  ['post', '/api/auth/login', false, [200, 400, 401, 413, 415, 429, 503], true],
  ['post', '/api/auth/logout', true, [204, 400, 401, 403, 413, 415, 429, 503], false],
  ['get', '/api/auth/me', true, [200, 400, 401, 413, 429, 503], false],
  ['post', '/api/pat', true, [201, 400, 401, 403, 413, 415, 422, 429, 503], true],
  ['get', '/api/pat', true, [200, 400, 401, 403, 413, 429, 503], false],
  ['delete', '/api/pat/{token_id}', true, [204, 400, 401, 403, 404, 413, 415, 429, 503], false],
  ['get', '/api/v2/members', true, [200, 400, 401, 403, 413, 429, 503], false],
  ['post', '/api/v2/members', true, [201, 400, 401, 403, 409, 413, 415, 429, 503], true],
  ['patch', '/api/v2/members/{user_id}', true, [200, 400, 401, 403, 404, 409, 413, 415, 429, 503], true],
  ['delete', '/api/v2/members/{user_id}', true, [204, 400, 401, 403, 404, 409, 413, 415, 429, 503], false],
]

describe('OpenAPI document of the identity routes', () => {
  test('every route: tags, summary, security scheme, a schema per status, request schema with an example', async () => {
    const { app } = await makeTestApp()
    const response = await app.handle(request('GET', '/swagger/json'))
    expect(response.status).toBe(200)
    const document = (await response.json()) as {
      paths: Record<string, Record<string, Operation>>
      components: { schemas: Record<string, { examples?: unknown[]; properties?: object }> }
    }
    for (const [method, path, secured, statuses, hasBody] of ROUTES) {
      const operation = document.paths[path]?.[method]
      expect({ route: `${method} ${path}`, found: Boolean(operation) }).toEqual({
        route: `${method} ${path}`,
        found: true,
      })
      expect(operation!.tags?.length).toBeGreaterThan(0)
      expect(operation!.summary?.length).toBeGreaterThan(5)
      if (secured) expect(operation!.security).toEqual(PROTECTED)
      else expect(operation!.security ?? []).toEqual([])
      expect(
        Object.keys(operation!.responses ?? {})
          .map(Number)
          .sort(),
      ).toEqual([...statuses].sort())
      for (const status of statuses.filter((code) => code !== 204)) {
        expect(operation!.responses![String(status)]!.content?.['application/json']?.schema).toBeDefined()
      }
      if (hasBody) {
        const reference = operation!.requestBody?.content?.['application/json']?.schema as { $ref?: string }
        const schema = document.components.schemas[reference.$ref!.split('/').pop()!]
        expect(schema?.properties).toBeDefined()
        expect(schema?.examples?.length).toBeGreaterThan(0)
      }
    }
    expect(document.paths['/api/pat/']).toBeUndefined()
  })
})
