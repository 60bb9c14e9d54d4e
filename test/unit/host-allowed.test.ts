import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { hostAllowed } from '../../src/modules/inbound/cors'

// Allow-list entries are stored lower-cased (sources/validation) and the request host is lower-cased
// before the check, so the rule itself compares exact text.
const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/)
const domain = fc.array(label, { minLength: 2, maxLength: 4 }).map((labels) => labels.join('.'))
const subdomainPrefix = fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => labels.join('.'))

describe('hostAllowed', () => {
  test('an exact entry matches that host and nothing else', () => {
    fc.assert(
      fc.property(domain, subdomainPrefix, (host, prefix) => {
        expect(hostAllowed(host, [host])).toBe(true)
        expect(hostAllowed(`${prefix}.${host}`, [host])).toBe(false)
      }),
    )
  })

  test('a wildcard entry matches subdomains at any depth, never the apex', () => {
    fc.assert(
      fc.property(domain, subdomainPrefix, (apex, prefix) => {
        expect(hostAllowed(`${prefix}.${apex}`, [`*.${apex}`])).toBe(true)
        expect(hostAllowed(apex, [`*.${apex}`])).toBe(false)
      }),
    )
  })

  test('a host that merely ends with the same letters is not a subdomain', () => {
    const cases: [string, string][] = [
      ['badexample.com', '*.example.com'],
      ['badexample.com', 'example.com'],
      ['example.com.evil.test', '*.example.com'],
      ['example.com.evil.test', 'example.com'],
      ['xexample.com', '*.example.com'],
      ['.example.com', '*.example.com'],
    ]
    for (const [host, entry] of cases) expect(hostAllowed(host, [entry])).toBe(false)
  })

  test('any entry of the list may match; an empty list matches nothing', () => {
    fc.assert(
      fc.property(
        fc.array(domain, { maxLength: 5 }),
        domain,
        fc.array(domain, { maxLength: 5 }),
        (before, host, after) => {
          expect(hostAllowed(host, [...before, host, ...after])).toBe(true)
          expect(hostAllowed(host, [])).toBe(false)
        },
      ),
    )
  })
})
