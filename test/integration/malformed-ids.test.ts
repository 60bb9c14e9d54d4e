import { beforeAll, describe, expect, test } from 'bun:test'
import { call, makeSignedInApp, testDatabase } from '../helpers/test-app'

beforeAll(() => testDatabase(), 60_000)

const MALFORMED = ['not-a-uuid', '123', '01975e0c6a1f7b2c9d3e4f5a6b7c8d9e', "1' or '1'='1"]
const WELL_FORMED = '01975e0c-6a1f-7b2c-9d3e-4f5a6b7c8d9e'

interface Document {
  paths: Record<
    string,
    Record<string, { parameters?: Array<{ in: string; name: string; schema: { format?: string } }> }>
  >
}

/**
 * One rule for ids in a path (docs/api.md): an id that is not a UUID is 400 `validation_failed`
 * naming the parameter, on every route of the published document that takes one, for the
 * organization's owner (so no permission or plan gate decides first). The webhook key is not an id.
 */
describe('malformed ids', () => {
  test('every id parameter of every route: 400 validation_failed naming it; the document says format uuid', async () => {
    const { app, token } = await makeSignedInApp()
    const document = (await (await call(app, undefined, 'GET', '/swagger/json')).json()) as Document
    const checked: string[] = []
    for (const [template, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const ids = (operation.parameters ?? []).filter(
          (parameter) => parameter.in === 'path' && parameter.name !== 'api_key',
        )
        for (const id of ids) {
          expect({ template, id: id.name, format: id.schema.format }).toEqual({
            template,
            id: id.name,
            format: 'uuid',
          })
          for (const malformed of MALFORMED) {
            let path = template
            for (const other of ids) {
              path = path.replace(
                `{${other.name}}`,
                other === id ? encodeURIComponent(malformed) : WELL_FORMED,
              )
            }
            const response = await call(
              app,
              token,
              method.toUpperCase(),
              path,
              method === 'get' || method === 'delete' ? undefined : {},
            )
            const body = (await response.json()) as {
              error: string
              details: Array<{ path: string; message: string }>
            }
            expect({
              route: `${method} ${template}`,
              malformed,
              status: response.status,
              error: body.error,
            }).toEqual({
              route: `${method} ${template}`,
              malformed,
              status: 400,
              error: 'validation_failed',
            })
            expect(body.details).toContainEqual({ path: `/${id.name}`, message: 'must be a UUID' })
          }
          checked.push(`${method} ${template} ${id.name}`)
        }
      }
    }
    // Sources (get, patch, delete, regenerate-key, logs, a log entry's two, health), leads (3), PATs (1),
    // members (2), webhook endpoints (get, patch, delete, rotate-secret, test, messages, recover, and a
    // message's two on retry).
    expect(checked.length).toBe(23)
  })
})
