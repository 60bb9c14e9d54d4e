import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { isUniqueViolation } from '../../src/db/unique-violation'
import {
  creationPosition,
  decodeCursor,
  encodeCursor,
  MICROSECOND_INSTANT,
  MILLISECOND_INSTANT,
  pageOf,
} from '../../src/lib/cursor'
import { AppError } from '../../src/lib/errors'

// The rules that have one home in lib/ and db/ and are used by several modules: the list cursor
// codec and the unique-violation test.

const uuid = fc.uuid({ version: 7 })
const instant = fc.date({
  min: new Date('1970-01-01T00:00:00Z'),
  max: new Date('9999-12-31T23:59:59Z'),
  noInvalidDate: true,
})

function refusal(run: () => unknown): unknown {
  try {
    run()
  } catch (error) {
    return error instanceof AppError ? { status: error.status, code: error.code } : error
  }
  return 'accepted'
}

describe('list cursors', () => {
  test('a creation-ordered row round-trips through its cursor', () => {
    fc.assert(
      fc.property(instant, uuid, (createdAt, id) => {
        const position = creationPosition({ createdAt, id })
        expect(decodeCursor(encodeCursor(position))).toEqual({ sortKey: createdAt.toISOString(), id })
      }),
    )
  })

  test('a microsecond sort key round-trips with its own pattern and is refused by the default one', () => {
    fc.assert(
      fc.property(instant, fc.integer({ min: 0, max: 999 }), uuid, (at, micros, id) => {
        const sortKey = at.toISOString().replace('Z', `${String(micros).padStart(3, '0')}Z`)
        const cursor = encodeCursor({ sortKey, id })
        expect(decodeCursor(cursor, MICROSECOND_INSTANT)).toEqual({ sortKey, id })
        expect(refusal(() => decodeCursor(cursor, MILLISECOND_INSTANT))).toEqual({
          status: 400,
          code: 'validation_failed',
        })
      }),
    )
  })

  test('anything this API did not hand out is a 400 validation_failed', () => {
    const id = '01975e0c-7b2a-7c3d-8e4f-5a6b7c8d9e0f'
    const base64url = (text: string) => Buffer.from(text).toString('base64url')
    const cases = [
      '',
      'not-base64-at-all!',
      base64url(id),
      base64url(`2026-01-01T00:00:00.000Z|not-a-uuid`),
      base64url(`yesterday|${id}`),
      base64url(`2026-01-01T00:00:00.000Z|${id}|extra`),
      base64url(`2026-01-01|${id}`),
    ]
    for (const cursor of cases) {
      expect({ cursor, result: refusal(() => decodeCursor(cursor)) }).toEqual({
        cursor,
        result: { status: 400, code: 'validation_failed' },
      })
    }
  })

  test('ids come back lower-case, so a cursor is the same whatever case the id was written in', () => {
    const id = '01975E0C-7B2A-7C3D-8E4F-5A6B7C8D9E0F'
    expect(decodeCursor(encodeCursor({ sortKey: '2026-01-01T00:00:00.000Z', id })).id).toBe(id.toLowerCase())
  })

  test('pageOf: limit + 1 rows give a page of limit and the cursor of its last row; fewer give no cursor', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 25 }), (limit, count) => {
        const rows = Array.from({ length: Math.min(count, limit + 1) }, (_, index) => ({
          id: `01975e0c-7b2a-7c3d-8e4f-${String(index).padStart(12, '0')}`,
          createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, index)),
        }))
        const page = pageOf(rows, limit, creationPosition)
        if (rows.length > limit) {
          expect(page.rows).toEqual(rows.slice(0, limit))
          expect(decodeCursor(page.nextCursor!)).toEqual(creationPosition(rows[limit - 1]!))
        } else {
          expect(page).toEqual({ rows, nextCursor: null })
        }
      }),
    )
  })
})

describe('isUniqueViolation', () => {
  const constraint = 'users_email_unique'
  const message = `duplicate key value violates unique constraint "${constraint}"`
  // The shapes a unique violation reaches us in: postgres.js, PGlite, a bare message, wrapped by Drizzle.
  const driverErrors: [string, Record<string, unknown>][] = [
    ['postgres.js (constraint_name)', { code: '23505', constraint_name: constraint, message }],
    ['PGlite (constraint)', { code: '23505', constraint, message }],
    ['only the server message', { code: '23505', message }],
  ]
  const wrapped = (cause: unknown, depth: number): unknown =>
    depth === 0 ? cause : { message: 'Failed query: insert …', cause: wrapped(cause, depth - 1) }

  for (const [shape, error] of driverErrors) {
    test(`${shape}, as thrown or wrapped up to 4 times: true for its constraint, false for another`, () => {
      for (const depth of [0, 1, 4]) {
        expect(isUniqueViolation(wrapped(error, depth), constraint)).toBe(true)
        expect(isUniqueViolation(wrapped(error, depth), 'leads_org_email_unique')).toBe(false)
        // A name that merely contains the constraint's name is another constraint.
        expect(isUniqueViolation(wrapped(error, depth), 'users_email')).toBe(false)
      }
    })
  }

  test('other SQLSTATEs, plain errors and non-errors are not unique violations', () => {
    for (const error of [
      { code: '23503', constraint_name: constraint, message },
      { code: '40001', message },
      new Error(message),
      null,
      undefined,
      'text',
    ]) {
      expect(isUniqueViolation(error, constraint)).toBe(false)
    }
  })
})
