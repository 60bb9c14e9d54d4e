import type { ObjectOptions, TSchema } from '@sinclair/typebox'
import { t } from 'elysia'

/**
 * Response schemas shared by every management module, so the OpenAPI document describes each
 * error status once and the same way (DESIGN §2).
 */
export const ErrorBody = t.Object(
  {
    error: t.String({ description: 'snake_case error code', examples: ['not_found'] }),
    message: t.String({ description: 'human-readable explanation' }),
    request_id: t.String({ description: 'the X-Request-Id of the request' }),
    details: t.Optional(
      t.Array(t.Object({ path: t.String(), message: t.String() }), {
        description: 'on 400: one entry per offending field, as a JSON pointer',
      }),
    ),
  },
  {
    additionalProperties: true,
    description: 'Error body: `{ error, message, request_id, ...fields of its own }`',
  },
)

export const RateLimitedBody = t.Object({
  error: t.Literal('rate_limited'),
  message: t.String(),
  request_id: t.String(),
  limit: t.Integer(),
  remaining: t.Integer(),
  retry_after: t.Integer({ description: 'seconds to wait before retrying' }),
})

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
