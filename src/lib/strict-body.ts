import type { TObject } from '@sinclair/typebox'
import { errors } from './errors'

/**
 * A `transform` hook that refuses body fields the schema does not name. Elysia's normalisation
 * silently drops unknown fields before validation: a typo then does nothing while answering 200
 * (`{"enable": false}` leaves a source enabled), or worse, widens a grant (`{"scope": [...]}`
 * would create a token with all of the user's permissions). A misspelt field is a 400 naming it.
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
