import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { InputGuard, MAX_JSON_DEPTH } from '../../src/lib/input-guard'

/** The plain definition: one character at a time, a backslash in a string skips the next one. */
function referenceDepthViolation(text: string, limit: number): number {
  let depth = 0
  let inString = false
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index)
    if (inString) {
      if (code === 92) index++
      else if (code === 34) inString = false
    } else if (code === 34) inString = true
    else if (code === 123 || code === 91) {
      if (++depth > limit) return index
    } else if (code === 125 || code === 93) depth--
  }
  return -1
}

const guard = new InputGuard()
const nested = (levels: number, inner = '1') => '['.repeat(levels) + inner + ']'.repeat(levels)

describe('JSON depth guard', () => {
  const cases: Array<[label: string, text: string, expected: number]> = [
    ['32 levels of arrays', nested(32), -1],
    ['33 levels of arrays', nested(33), 32],
    ['33 levels of objects', '{"a":'.repeat(33) + '1' + '}'.repeat(33), 5 * 32],
    ['brackets inside a string do not count', `{"a":"${'['.repeat(100)}"}`, -1],
    ['an escaped quote does not end the string', `{"a":"\\"${'['.repeat(100)}"}`, -1],
    // `{"a":"\\"` is 9 characters at level 1; the 32nd bracket after it (index 9 + 31) opens level 33.
    ['an escaped backslash before the closing quote ends it', `{"a":"\\\\"${'['.repeat(40)}`, 9 + 31],
    ['an unterminated string hides what follows', `"${'['.repeat(40)}`, -1],
    ['a short text cannot exceed the limit', '[[[', -1],
  ]
  for (const [label, text, expected] of cases) {
    test(label, () => {
      expect(guard.depthViolation(text, MAX_JSON_DEPTH)).toBe(expected)
    })
  }

  test('agrees with the character-by-character definition on any text of brackets, quotes and escapes', () => {
    const alphabet = fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ':', ',')
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 200 }), fc.integer({ min: 0, max: 40 }), (chars, limit) => {
        const text = chars.join('')
        expect(guard.depthViolation(text, limit)).toBe(referenceDepthViolation(text, limit))
      }),
      { numRuns: 5000 },
    )
  })
})

describe('body guard', () => {
  // The inbound service and every other route refuse these before normalizeLead or a schema runs.
  const cases: Array<[body: unknown, path: string]> = [
    [{ first_name: 'a\u0000b' }, '/first_name'],
    [{ company: 'bad\ud800' }, '/company'],
    [{ custom: { deep: ['ok', 'x\udfffy'] } }, '/custom/deep/1'],
    [{ 'key\u0000': 'v' }, '/key\ufffd'],
    [{ attribution: { 'a/b': '\u0000' } }, '/attribution/a~1b'],
    [nestedObject(31, 'x\u0000'), `${'/a'.repeat(31)}`],
  ]
  for (const [body, path] of cases) {
    test(`NUL or an unpaired surrogate at ${JSON.stringify(path)} is named there`, () => {
      expect(guard.unstorable(body).map((detail) => detail.path)).toEqual([path])
    })
  }
  test('a clean body has nothing to refuse', () => {
    expect(guard.unstorable({ a: ['b', { c: 'd\u00e9' }], 'e/f': 1, g: null })).toEqual([])
  })
})

function nestedObject(levels: number, leaf: unknown): unknown {
  let value = leaf
  for (let level = 0; level < levels; level++) value = { a: value }
  return value
}

describe('parameter guard', () => {
  const cases: Array<[label: string, parameters: Record<string, unknown>, paths: string[]]> = [
    ['clean values', { limit: '10', q: 'ada', since: '2026-01-01T00:00:00Z' }, []],
    ['NUL in a value', { q: 'a\u0000b' }, ['/q']],
    ['a lone surrogate in a value', { q: '\ud800' }, ['/q']],
    ['a lone surrogate in a name', { 'q\ud800': 'x' }, ['/q\ufffd']],
    [
      'year zero, plain or signed',
      { until: '0000-01-01T00:00:00Z', since: '+000000-01-01' },
      ['/until', '/since'],
    ],
    ['year zero in an array value', { until: ['2026-01-01', '-0000-01-01'] }, ['/until']],
    ['a slash in a name is escaped in the pointer', { 'a/b': '\u0000' }, ['/a~1b']],
  ]
  for (const [label, parameters, paths] of cases) {
    test(label, () => {
      expect(guard.unstorableParameters(parameters, 'query parameter').map((detail) => detail.path)).toEqual(
        paths,
      )
    })
  }
})
