import { errors } from './errors'
import { isUuid } from './ids'

/**
 * Opaque keyset cursors, one codec for every list: base64url of `<sort key>|<id>` of the last row
 * of a page. The sort key is the row's position in list order written as text (an ISO instant);
 * the id breaks ties. Clients must not parse it.
 *
 * Lists ordered by a UUIDv7 `id desc` (creation order) place the next page by the id alone;
 * `created_at` travels along so a cursor stays meaningful if such a list ever orders by time. The
 * delivery logs order by `(received_at, id)` at microsecond precision and use both parts.
 */
export interface CursorPosition {
  sortKey: string
  id: string
}

/** `Date.toISOString()`: the sort key of the lists ordered by creation. */
export const MILLISECOND_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** PostgreSQL's `YYYY-MM-DD"T"HH24:MI:SS.US"Z"`: timestamps kept to the microsecond. */
export const MICROSECOND_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(`${position.sortKey}|${position.id}`).toString('base64url')
}

/** The position a cursor names; a 400 `validation_failed` on `/cursor` for anything this API did not hand out. */
export function decodeCursor(cursor: string, sortKeyPattern: RegExp = MILLISECOND_INSTANT): CursorPosition {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const [sortKey = '', id = '', extra] = text.split('|')
  if (extra !== undefined || !sortKeyPattern.test(sortKey) || !isUuid(id)) {
    throw errors.validation('the cursor is not valid', [
      { path: '/cursor', message: 'use the next_cursor of a previous page, unchanged' },
    ])
  }
  return { sortKey, id: id.toLowerCase() }
}

/** The cursor position of a row in a list ordered by creation. */
export function creationPosition(row: { createdAt: Date; id: string }): CursorPosition {
  return { sortKey: row.createdAt.toISOString(), id: row.id }
}

/**
 * Given `limit + 1` rows fetched in list order, the page to return and the cursor of the next one.
 * Fetching one extra row means the last page says `next_cursor: null` instead of leading to an
 * empty page.
 */
export function pageOf<Row>(
  rows: Row[],
  limit: number,
  positionOf: (row: Row) => CursorPosition,
): { rows: Row[]; nextCursor: string | null } {
  if (rows.length <= limit) return { rows, nextCursor: null }
  const page = rows.slice(0, limit)
  return { rows: page, nextCursor: encodeCursor(positionOf(page[page.length - 1]!)) }
}
