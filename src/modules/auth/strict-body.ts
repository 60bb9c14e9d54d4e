import type { TObject } from '@sinclair/typebox'
import { errors } from '../../lib/errors'

/**
 * A `transform` hook that refuses body fields the schema does not name. Elysia's normalisation
 * silently drops unknown fields before validation; on identity routes that turns a typo into a
 * wider grant (`{"scope": ["leads.read"]}` would create a token with all of the user's
 * permissions), so a misspelt field is a 400 naming it instead.
 */
export function rejectUnknownFields(schema: TObject) {
  const known = new Set(Object.keys(schema.properties))
  return ({ body }: { body: unknown }) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return
    const unknown = Object.keys(body).filter((key) => !known.has(key))
    if (unknown.length === 0) return
    throw errors.validation(
      'the request does not match the schema',
      unknown.map((key) => ({
        path: `/${key}`,
        message: `unknown field; expected one of: ${[...known].join(', ')}`,
      })),
    )
  }
}
