import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { CUSTOM_FIELDS_MAX_COUNT, LEAD_FIELDS, type LeadField } from '../../src/lib/contact'
import { normalizeLead } from '../../src/modules/inbound/normalize'

// normalizeLead is the inbound path's pure rule: field mapping, then types and sizes, custom fields,
// spam signals, attribution and the dedup keys. Each table row is a class of input, run over every
// lead field where the rule is per field.

const noMapping = { fieldMapping: {}, defaultCountry: null }
const leadFieldNames = Object.keys(LEAD_FIELDS) as LeadField[]
// `full_name` is split into first and last name and never kept itself.
const storedFieldOf: Record<LeadField, keyof ReturnType<typeof normalizeLead>['lead'] | null> = {
  first_name: 'firstName',
  last_name: 'lastName',
  full_name: null,
  email: 'email',
  phone_raw: 'phoneRaw',
  status: 'status',
}

function paths(result: ReturnType<typeof normalizeLead>): string[] {
  return result.details.map((detail) => detail.path)
}

describe('normalizeLead: lead fields', () => {
  const nonStrings: [string, unknown, string][] = [
    ['a number', 42, 'number'],
    ['a boolean', true, 'boolean'],
    ['an array', ['a'], 'array'],
    ['an object', { a: 1 }, 'object'],
  ]

  for (const field of leadFieldNames) {
    const { maxLength } = LEAD_FIELDS[field]

    test(`${field}: a string up to ${maxLength} characters is accepted and trimmed`, () => {
      for (const value of ['x', '  padded  ', 'y'.repeat(maxLength)]) {
        const result = normalizeLead({ [field]: value }, noMapping)
        expect(result.details).toEqual([])
        const stored = storedFieldOf[field]
        if (stored) expect(result.lead[stored]).toBe(value.trim())
      }
    })

    test(`${field}: longer than ${maxLength} characters is refused at /${field}`, () => {
      const result = normalizeLead({ [field]: 'y'.repeat(maxLength + 1) }, noMapping)
      expect(result.details).toEqual([
        { path: `/${field}`, message: `must be at most ${maxLength} characters` },
      ])
    })

    test(`${field}: every non-string type is refused with its name`, () => {
      for (const [, value, typeName] of nonStrings) {
        const result = normalizeLead({ [field]: value }, noMapping)
        expect(result.details).toEqual([{ path: `/${field}`, message: `must be a string, got ${typeName}` }])
      }
    })

    test(`${field}: null, absent and blank all mean "not given"`, () => {
      for (const body of [{ [field]: null }, {}, { [field]: '   ' }, { [field]: '' }]) {
        const result = normalizeLead(body, noMapping)
        expect(result.details).toEqual([])
        const stored = storedFieldOf[field]
        if (stored) expect(result.lead[stored]).toBeNull()
      }
    })
  }

  test('property: any lead-field strings within their limits pass and are stored trimmed', () => {
    const leadFieldsBody = fc.record(
      Object.fromEntries(
        leadFieldNames
          .filter((field) => field !== 'full_name')
          .map((field) => [
            field,
            fc.string({ maxLength: LEAD_FIELDS[field].maxLength, unit: 'grapheme-ascii' }),
          ]),
      ),
      { requiredKeys: [] },
    )
    fc.assert(
      fc.property(leadFieldsBody, (body) => {
        const result = normalizeLead(body, noMapping)
        expect(result.details).toEqual([])
        for (const [field, value = ''] of Object.entries(body)) {
          const stored = storedFieldOf[field as LeadField]!
          expect(result.lead[stored]).toBe(value.trim() === '' ? null : value.trim())
        }
      }),
      { numRuns: 200 },
    )
  })

  test('full_name fills whichever of first and last name is missing, never overriding one that was sent', () => {
    const cases: [Record<string, string>, string | null, string | null][] = [
      [{ full_name: 'Ada Lovelace' }, 'Ada', 'Lovelace'],
      [{ full_name: 'Ada King Lovelace' }, 'Ada', 'King Lovelace'],
      [{ full_name: 'Ada' }, 'Ada', null],
      [{ full_name: 'Ada Lovelace', first_name: 'Augusta' }, 'Augusta', 'Lovelace'],
      [{ full_name: 'Ada Lovelace', last_name: 'King' }, 'Ada', 'King'],
      [{ full_name: 'Ada Lovelace', first_name: 'A', last_name: 'L' }, 'A', 'L'],
    ]
    for (const [body, first, last] of cases) {
      const { lead } = normalizeLead(body, noMapping)
      expect([lead.firstName, lead.lastName]).toEqual([first, last])
    }
  })
})

describe('normalizeLead: dedup keys', () => {
  test('e-mail: the trimmed, lower-cased address when valid, else no key (the address itself is kept)', () => {
    const cases: [string, string | null][] = [
      ['ada@example.com', 'ada@example.com'],
      ['  Ada@Example.COM ', 'ada@example.com'],
      ['ada.lovelace+leads@mail.example.co.uk', 'ada.lovelace+leads@mail.example.co.uk'],
      ['ada', null],
      ['ada@', null],
      ['@example.com', null],
      ['ada@example', null],
      ['ada@example.c', null],
      ['ada lovelace@example.com', null],
      ['ada@@example.com', null],
      [`${'a'.repeat(250)}@example.com`, null],
    ]
    for (const [email, key] of cases) {
      const { lead, details } = normalizeLead({ email }, noMapping)
      expect(details).toEqual([])
      expect(lead.email).toBe(email.trim())
      expect(lead.emailNormalized).toBe(key)
    }
  })

  test('phone: E.164 when it parses, read with the source default country when it has no + prefix', () => {
    const cases: [string, string | null, string | null][] = [
      ['+44 20 7946 0958', null, '+442079460958'],
      ['+44 20 7946 0958', 'DE', '+442079460958'],
      ['020 7946 0958', 'GB', '+442079460958'],
      ['030 123456', 'DE', '+4930123456'],
      ['020 7946 0958', null, null],
      ['12', 'GB', null],
      ['not a phone', 'GB', null],
    ]
    for (const [phone, country, key] of cases) {
      const { lead } = normalizeLead({ phone_raw: phone }, { fieldMapping: {}, defaultCountry: country })
      expect(lead.phoneRaw).toBe(phone.trim())
      expect(lead.phoneE164).toBe(key)
    }
  })
})

describe('normalizeLead: field mapping', () => {
  test('a mapped field lands on its target, lead field or custom field; the original name is not kept', () => {
    const cases: [Record<string, string>, Record<string, unknown>, Partial<Record<string, unknown>>][] = [
      [{ 'your-email': 'email' }, { 'your-email': 'ada@example.com' }, { email: 'ada@example.com' }],
      [{ tel: 'phone_raw' }, { tel: '+44 20 7946 0958' }, { phoneRaw: '+44 20 7946 0958' }],
      [{ name: 'full_name' }, { name: 'Ada Lovelace' }, { firstName: 'Ada', lastName: 'Lovelace' }],
      [{ stage: 'status' }, { stage: 'new' }, { status: 'new' }],
      [{ plan: 'custom.plan_name' }, { plan: 'pro' }, { customFields: { plan_name: 'pro' } }],
      // A mapping wins over the field's own meaning.
      [
        { email: 'custom.contact' },
        { email: 'ada@example.com' },
        { email: null, customFields: { contact: 'ada@example.com' } },
      ],
    ]
    for (const [fieldMapping, body, expected] of cases) {
      const { lead, details } = normalizeLead(body, { fieldMapping, defaultCountry: null })
      expect(details).toEqual([])
      expect(lead).toMatchObject(expected)
      for (const name of Object.keys(body)) {
        if (fieldMapping[name] !== `custom.${name}`)
          expect(Object.hasOwn(lead.customFields, name)).toBe(false)
      }
    }
  })

  test('a mapped value obeys the target field rules, reported at the inbound field name', () => {
    const result = normalizeLead(
      { 'your-email': 7 },
      { fieldMapping: { 'your-email': 'email' }, defaultCountry: null },
    )
    expect(result.details).toEqual([{ path: '/your-email', message: 'must be a string, got number' }])
  })

  test('mapping keys are own properties only: a body field named like an Object member is not mapped', () => {
    for (const name of ['toString', 'constructor', 'hasOwnProperty', 'valueOf']) {
      const { lead } = normalizeLead({ [name]: 'x' }, noMapping)
      expect(lead.customFields).toEqual({ [name]: 'x' })
    }
  })
})

describe('normalizeLead: custom fields, signals, attribution', () => {
  test('any other field is a custom field, whatever its JSON type; names of every shape allowed are kept', () => {
    const values: unknown[] = ['text', 3, true, null, ['a'], { nested: 1 }]
    const names = ['company', 'Plan_2', 'utm.source', 'a-b', 'x'.repeat(100), 'constructor']
    for (const name of names) {
      for (const value of values) {
        const { lead, details } = normalizeLead({ [name]: value }, noMapping)
        expect(details).toEqual([])
        expect(Object.hasOwn(lead.customFields, name)).toBe(true)
        expect(lead.customFields[name]).toEqual(value)
      }
    }
  })

  test('custom field names outside 1-100 characters of A-Z a-z 0-9 _ . - are refused at their path', () => {
    // (A name with `/` or `~` is reported unescaped here, unlike every other path: left as it is.)
    for (const name of ['has space', 'ümlaut', 'x'.repeat(101), 'semi;colon', 'quote"', 'a:b']) {
      const result = normalizeLead({ [name]: 'v' }, noMapping)
      expect(result.details).toEqual([
        {
          path: `/${name}`,
          message: 'custom field names are 1-100 characters of A-Z a-z 0-9 _ . -',
        },
      ])
    }
  })

  test(`at most ${CUSTOM_FIELDS_MAX_COUNT} custom fields: one more is refused at /`, () => {
    const fields = (count: number) =>
      Object.fromEntries(Array.from({ length: count }, (_, index) => [`f${index}`, 'v']))
    expect(normalizeLead(fields(CUSTOM_FIELDS_MAX_COUNT), noMapping).details).toEqual([])
    expect(normalizeLead(fields(CUSTOM_FIELDS_MAX_COUNT + 1), noMapping).details).toEqual([
      {
        path: '/',
        message: `at most ${CUSTOM_FIELDS_MAX_COUNT} custom fields are kept, got ${CUSTOM_FIELDS_MAX_COUNT + 1}`,
      },
    ])
  })

  test('fields starting with _ are spam signals, never custom fields', () => {
    for (const name of ['_gotcha', '_hp', '_elapsed_ms', '_anything']) {
      const { lead } = normalizeLead({ [name]: 'x', company: 'c' }, noMapping)
      expect(lead.signals).toEqual({ [name]: 'x' })
      expect(lead.customFields).toEqual({ company: 'c' })
    }
  })

  test('attribution and page_url are kept as attribution; page_url is cut at 2,048 characters', () => {
    const { lead } = normalizeLead(
      {
        attribution: { first_touch: { utm_source: 'news' } },
        page_url: `https://example.com/${'p'.repeat(3000)}`,
      },
      noMapping,
    )
    expect(lead.customFields).toEqual({})
    expect(lead.attribution.first_touch).toEqual({ utm_source: 'news' })
    expect(String(lead.attribution.page_url)).toHaveLength(2048)
  })

  test('attribution of any type but an object, and page_url of any type but a string, are refused', () => {
    for (const value of ['text', 1, true, ['a']]) {
      expect(paths(normalizeLead({ attribution: value }, noMapping))).toEqual(['/attribution'])
    }
    for (const value of [1, true, ['a'], { a: 1 }]) {
      expect(paths(normalizeLead({ page_url: value }, noMapping))).toEqual(['/page_url'])
    }
    for (const body of [{ attribution: null }, { page_url: null }]) {
      expect(normalizeLead(body, noMapping).details).toEqual([])
    }
  })

  test('attribution over 8 KB of JSON is refused', () => {
    const result = normalizeLead({ attribution: { blob: 'x'.repeat(8 * 1024) } }, noMapping)
    expect(result.details).toEqual([{ path: '/attribution', message: 'must be at most 8192 bytes of JSON' }])
  })
})
