import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { normalizeLead } from '../../src/modules/inbound/normalize'
import { DISPOSABLE_EMAIL_DOMAINS, MIN_HUMAN_ELAPSED_MS, spamReasons } from '../../src/modules/inbound/spam'

// The spam rules read a normalised lead, so each case goes through normalizeLead as a request body
// would: the rules see what the inbound path gives them, not a hand-built object.
function reasonsFor(body: Record<string, unknown>): string[] {
  return spamReasons(normalizeLead(body, { fieldMapping: {}, defaultCountry: null }).lead)
}

const person = { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' }

describe('spamReasons', () => {
  test('an ordinary submission has no reason', () => {
    expect(reasonsFor(person)).toEqual([])
    expect(
      reasonsFor({ ...person, _elapsed_ms: 60_000, _gotcha: '', company: 'https://example.com' }),
    ).toEqual([])
  })

  for (const honeypot of ['_gotcha', '_hp']) {
    test(`${honeypot}: any filled value is spam, an empty one is not`, () => {
      for (const filled of ['x', ' ', 0, 1, true, ['a'], { a: 1 }]) {
        expect(reasonsFor({ ...person, [honeypot]: filled })).toEqual([`honeypot_filled:${honeypot}`])
      }
      for (const empty of ['', null, false]) {
        expect(reasonsFor({ ...person, [honeypot]: empty })).toEqual([])
      }
    })
  }

  test('a link in the first or the last name, in any of its forms and any case, is spam', () => {
    const links = [
      'http://spam.example',
      'HTTPS://spam.example',
      'visit www.spam.example',
      '[url=x]',
      '<a href="x">',
    ]
    for (const field of ['first_name', 'last_name']) {
      for (const link of links) {
        expect(reasonsFor({ ...person, [field]: link })).toEqual(['link_in_name'])
      }
    }
  })

  test('names that only look like parts of a link are not spam', () => {
    for (const name of ['Www', 'Https', 'Anna', 'url', 'a.b']) {
      expect(reasonsFor({ ...person, first_name: name, last_name: name })).toEqual([])
    }
  })

  test('every listed throw-away domain is spam, in any case; its subdomains and other domains are not', () => {
    for (const domain of DISPOSABLE_EMAIL_DOMAINS) {
      expect(reasonsFor({ ...person, email: `ada@${domain}` })).toEqual(['disposable_email_domain'])
      expect(reasonsFor({ ...person, email: `Ada@${domain.toUpperCase()}` })).toEqual([
        'disposable_email_domain',
      ])
      expect(reasonsFor({ ...person, email: `ada@mail.${domain}` })).toEqual([])
    }
    for (const email of ['ada@gmail.com', 'ada@example.org', 'ada@mailinator.com.example']) {
      expect(reasonsFor({ ...person, email })).toEqual([])
    }
  })

  test(`_elapsed_ms from 0 to under ${MIN_HUMAN_ELAPSED_MS} is too fast; anything else, or not a number, is not`, () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: MIN_HUMAN_ELAPSED_MS, maxExcluded: true, noNaN: true }),
        (elapsed) => {
          expect(reasonsFor({ ...person, _elapsed_ms: elapsed })).toEqual(['submitted_too_fast'])
        },
      ),
    )
    fc.assert(
      fc.property(fc.double({ min: MIN_HUMAN_ELAPSED_MS, noNaN: true }), (elapsed) => {
        expect(reasonsFor({ ...person, _elapsed_ms: elapsed })).toEqual([])
      }),
    )
    for (const elapsed of [-1, -0.5, Number.NEGATIVE_INFINITY, '10', null, true]) {
      expect(reasonsFor({ ...person, _elapsed_ms: elapsed })).toEqual([])
    }
  })

  test('every rule that holds is reported, in a fixed order', () => {
    expect(
      reasonsFor({
        first_name: 'www.spam.example',
        email: 'bot@mailinator.com',
        _hp: 'x',
        _gotcha: 'x',
        _elapsed_ms: 10,
      }),
    ).toEqual([
      'honeypot_filled:_gotcha',
      'honeypot_filled:_hp',
      'link_in_name',
      'disposable_email_domain',
      'submitted_too_fast',
    ])
  })
})
