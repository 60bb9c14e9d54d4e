import { describe, expect, test } from 'bun:test'
import { checkDomain, corsHeaders, preflightHeaders } from '../../src/modules/inbound/cors'
import type { CachedSource } from '../../src/modules/sources/source-cache'

function source(domainAllowlist: string[]): CachedSource {
  return {
    id: 'source',
    organizationId: 'organization',
    name: 'Contact form',
    enabled: true,
    keyDigest: 'digest',
    previousKeyDigest: null,
    previousKeyExpiresAt: null,
    ipRanges: [],
    domainAllowlist,
    fieldMapping: {},
    defaultCountry: null,
    spamFilter: true,
    loadedAt: 0,
  }
}

const from = (headers: Record<string, string>) =>
  new Request('http://localhost/api/webhook/lead/x', { method: 'POST', headers })

describe('checkDomain: the one domain check of the POST and the preflight', () => {
  test('without a domain allow list every request passes, whatever it sends', () => {
    const variants: Array<Record<string, string>> = [
      {},
      { origin: 'null' },
      { origin: 'https://any.test' },
      { referer: 'x' },
    ]
    for (const headers of variants) {
      expect(checkDomain(source([]), from(headers))).toEqual({ allowed: true, host: null })
    }
  })

  const listed = source(['shop.test', '*.example.com'])
  const cases: Array<[Record<string, string>, boolean, string | null]> = [
    [{ origin: 'https://shop.test' }, true, 'shop.test'],
    [{ origin: 'https://a.b.example.com:8443' }, true, 'a.b.example.com'],
    [{ referer: 'https://promo.example.com/landing?x=1' }, true, 'promo.example.com'],
    [{ origin: 'https://SHOP.test' }, true, 'shop.test'],
    [{ origin: 'https://example.com' }, false, 'example.com'],
    [{ origin: 'https://shop.test.evil.io' }, false, 'shop.test.evil.io'],
    // An Origin that names no host is not replaced by the Referer beside it.
    [{ origin: 'null', referer: 'https://shop.test/' }, false, null],
    [{ origin: 'not a url', referer: 'https://shop.test/' }, false, null],
    [{}, false, null],
  ]
  for (const [headers, allowed, host] of cases) {
    test(`with a list: ${JSON.stringify(headers)} → ${allowed ? 'allowed' : 'refused'} (host ${host})`, () => {
      expect(checkDomain(listed, from(headers))).toEqual({ allowed, host })
    })
  }
})

describe('corsHeaders and preflightHeaders', () => {
  const exposed = 'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After'
  const cases: Array<[string, CachedSource | null, string | null, Record<string, string>]> = [
    ['no Origin: nothing', source([]), null, {}],
    [
      'no list: *',
      source([]),
      'https://any.test',
      { 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed },
    ],
    [
      'unknown key: *',
      null,
      'https://any.test',
      { 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed },
    ],
    [
      'no list, Origin null: *',
      source([]),
      'null',
      { 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed },
    ],
    [
      'a list: the Origin echoed, refused or not',
      source(['shop.test']),
      'https://other.test',
      {
        'access-control-allow-origin': 'https://other.test',
        vary: 'Origin',
        'access-control-expose-headers': exposed,
      },
    ],
    ['a list, Origin null: never echoed', source(['shop.test']), 'null', {}],
  ]
  for (const [name, owner, origin, headers] of cases) {
    test(name, () => {
      expect(corsHeaders(owner, origin)).toEqual(headers)
    })
  }

  test('a preflight adds the methods, headers and max age; a missing Origin is answered as *', () => {
    const grant = {
      'access-control-allow-methods': 'POST, GET, OPTIONS',
      'access-control-allow-headers': 'Content-Type, X-Request-Id',
      'access-control-max-age': '600',
    }
    expect(preflightHeaders(source([]), null)).toEqual({
      'access-control-allow-origin': '*',
      'access-control-expose-headers': exposed,
      ...grant,
    })
    expect(preflightHeaders(source(['shop.test']), 'https://shop.test')).toEqual({
      'access-control-allow-origin': 'https://shop.test',
      vary: 'Origin',
      'access-control-expose-headers': exposed,
      ...grant,
    })
  })
})
