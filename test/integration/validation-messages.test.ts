import { beforeAll, describe, expect, test } from 'bun:test'
import { call, makeSignedInApp, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

const SOURCE = '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e'
const USER = '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9f'

// [method, path, body, the detail expected]: one case per kind of check, across query, path and body.
const CASES: Array<[string, string, unknown, { path: string; message: string }]> = [
  [
    'GET',
    '/api/webhook/sources?limit=500',
    undefined,
    { path: '/limit', message: 'must be an integer from 1 to 200' },
  ],
  [
    'GET',
    '/api/webhook/sources?limit=lots',
    undefined,
    { path: '/limit', message: 'must be an integer from 1 to 200' },
  ],
  [
    'GET',
    '/api/v2/leads?limit=0',
    undefined,
    { path: '/limit', message: 'must be an integer from 1 to 200' },
  ],
  [
    'GET',
    '/api/v2/members?limit=2.5',
    undefined,
    { path: '/limit', message: 'must be an integer from 1 to 200' },
  ],
  [
    'GET',
    `/api/webhook/sources/${SOURCE}/logs?outcome=bad`,
    undefined,
    { path: '/outcome', message: 'must be one of: created, updated, spam, error, rejected' },
  ],
  [
    'GET',
    `/api/webhook/sources/${SOURCE}/logs?status=abc`,
    undefined,
    { path: '/status', message: 'must be an integer from 100 to 599' },
  ],
  [
    'GET',
    `/api/webhook/sources/${SOURCE}/logs?limit=50&status=700`,
    undefined,
    { path: '/status', message: 'must be an integer from 100 to 599' },
  ],
  [
    'GET',
    '/api/webhook/sources?enabled=maybe',
    undefined,
    { path: '/enabled', message: 'must be true or false' },
  ],
  [
    'PATCH',
    `/api/v2/members/${USER}`,
    { role: 'king' },
    { path: '/role', message: 'must be one of: owner, admin, member, viewer' },
  ],
  [
    'POST',
    '/api/pat',
    { name: 'x', expires_in_days: 'soon' },
    { path: '/expires_in_days', message: 'must be an integer from 1 to 365 or null' },
  ],
  [
    'POST',
    `/api/webhook/sources/${SOURCE}/regenerate-key`,
    { grace_seconds: '60' },
    { path: '/grace_seconds', message: 'must be an integer from 0 to 86400' },
  ],
  [
    'POST',
    '/api/webhook/sources',
    { name: 5 },
    { path: '/name', message: expect.stringMatching(/^must be a string/) },
  ],
  ['GET', '/api/v2/leads/nope', undefined, { path: '/id', message: 'must be a UUID' }],
]

describe('validation messages', () => {
  test('name the parameter as a JSON pointer, list allowed values and ranges, never schema internals', async () => {
    const { app, token } = await makeSignedInApp()
    for (const [method, path, body, detail] of CASES) {
      const response = await call(app, token, method, path, body)
      const json = (await response.json()) as {
        error: string
        details: Array<{ path: string; message: string }>
      }
      expect({ path, status: response.status, error: json.error }).toEqual({
        path,
        status: 400,
        error: 'validation_failed',
      })
      expect({ path, details: json.details }).toEqual({ path, details: [detail] })
      expect(JSON.stringify(json)).not.toMatch(/Expected|kind|UnionEnum|'integer', 'integer'|should be/)
    }
  })
})
