import { errors } from './errors'
import { isUuid } from './ids'

/**
 * Opaque list cursors: base64url of `created_at|id` of the last row of a page. Ids are UUIDv7, so
 * `id desc` is creation order and the id alone places the next page; created_at travels along so a
 * cursor stays meaningful if a list ever orders by time. Clients must not parse it.
 */
export interface CursorPosition {
  createdAt: Date
  id: string
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(`${position.createdAt.toISOString()}|${position.id}`).toString('base64url')
}

export function decodeCursor(cursor: string): CursorPosition {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const [time = '', id = '', extra] = text.split('|')
  const createdAt = new Date(time)
  if (extra !== undefined || !isUuid(id) || Number.isNaN(createdAt.getTime())) {
    throw errors.validation('the cursor is not valid', [
      { path: '/cursor', message: 'use the next_cursor of a previous page, unchanged' },
    ])
  }
  return { createdAt, id: id.toLowerCase() }
}

/**
 * Given `limit + 1` rows fetched in list order, the page to return and the cursor of the next one.
 * Fetching one extra row means the last page says `next_cursor: null` instead of leading to an
 * empty page.
 */
export function pageOf<Row extends { id: string; createdAt: Date }>(
  rows: Row[],
  limit: number,
): { rows: Row[]; nextCursor: string | null } {
  if (rows.length <= limit) return { rows, nextCursor: null }
  const page = rows.slice(0, limit)
  const last = page[page.length - 1]!
  return { rows: page, nextCursor: encodeCursor(last) }
}
