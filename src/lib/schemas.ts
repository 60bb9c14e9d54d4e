import {
  type IntegerOptions,
  type ObjectOptions,
  type SchemaOptions,
  type TSchema,
  Type,
} from '@sinclair/typebox'
import { t } from 'elysia'
import { ERROR_CODES, type ErrorCode } from './errors'

/**
 * A whole number in a JSON body or response. Elysia's `t.Integer` also accepts a numeric string
 * (what a query string needs) and publishes `anyOf: [string, integer]`, which generated clients type
 * as `string | number`; JSON carries real numbers, so bodies and responses use TypeBox's own.
 * Query parameters keep `t.Integer` (it parses the text); the document shows them as integers.
 */
export const JsonInteger = (options?: IntegerOptions) => Type.Integer(options)

/**
 * `schema` or null. Elysia's `t.Nullable` adds the OpenAPI 3.0 keyword `nullable`, which has no
 * meaning in a 3.1 document; a union with null is what 3.1 (JSON Schema) says.
 */
export const Nullable = <T extends TSchema>(schema: T, options?: SchemaOptions) =>
  t.Union([schema, t.Null()], options)

/**
 * The one rule for ids in a path: a UUID, else 400 `validation_failed` naming the parameter, on
 * every route (docs/api.md). A well-formed id that names nothing of yours is a 404.
 */
export const ResourceId = (description: string) =>
  t.String({ format: 'uuid', description, examples: ['01970c6e-5b2a-7cc1-8f3e-6d1c2b3a4f50'] })

/**
 * Response schemas shared by every management module, so the OpenAPI document describes each
 * error status once and the same way (DESIGN §2).
 */
export const ErrorBody = t.Object(
  {
    // Literals, not t.UnionEnum: that one publishes a `default`, meaningless for an error code.
    error: t.Union(
      (Object.keys(ERROR_CODES) as ErrorCode[]).map((code) => t.Literal(code)),
      {
        description: 'the error code: one of a closed set, each with one HTTP status (docs/api.md)',
      },
    ),
    message: t.String({ description: 'human-readable explanation' }),
    request_id: t.String({ description: 'the X-Request-Id of the request' }),
    details: t.Optional(
      t.Array(t.Object({ path: t.String(), message: t.String() }), {
        description: 'on 400: one entry per offending field, as a JSON pointer',
      }),
    ),
  },
  {
    title: 'Error',
    additionalProperties: true,
    description: 'Error body: `{ error, message, request_id, ...fields of its own }`',
  },
)

export const RateLimitedBody = t.Object(
  {
    error: t.Literal('rate_limited'),
    message: t.String(),
    request_id: t.String(),
    limit: JsonInteger(),
    remaining: JsonInteger(),
    retry_after: JsonInteger({ description: 'seconds to wait before retrying' }),
  },
  { title: 'RateLimitedError' },
)

/** The error statuses every authenticated management route can answer. */
export const managementErrors = {
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  429: RateLimitedBody,
  503: ErrorBody,
} as const

/** The page size of every list when `?limit=` is absent. */
export const DEFAULT_PAGE_SIZE = 50

export const ListQueryFields = {
  limit: t.Optional(
    t.Integer({
      minimum: 1,
      maximum: 200,
      default: DEFAULT_PAGE_SIZE,
      description: `page size (default ${DEFAULT_PAGE_SIZE}, max 200)`,
    }),
  ),
  cursor: t.Optional(
    t.String({ maxLength: 200, description: 'the `next_cursor` of the previous page; opaque' }),
  ),
}

export const NextCursor = t.Union([t.String(), t.Null()], {
  description: 'pass as `?cursor=` for the next page; null on the last page',
})

/** The envelope of every list: one page of `item`s and the cursor of the next page. */
export function ListPage<Item extends TSchema>(item: Item, options: ObjectOptions) {
  return t.Object({ data: t.Array(item), next_cursor: NextCursor }, options)
}
