import { describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import {
  digestSecret,
  digestsEqual,
  generateSecret,
  generateWebhookSecret,
  isWellFormedSecret,
  maskSecret,
  maskSecretsInText,
  maskWebhookSecret,
  openSecretBox,
  SECRET_PREFIXES,
  SECRETS_KEY_FILE,
  SecretBox,
  type SecretKind,
} from '../../src/lib/secrets'

const KINDS = Object.keys(SECRET_PREFIXES) as SecretKind[]
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

describe('secrets', () => {
  test('generated secrets have the prefix, length and a valid checksum', () => {
    for (const kind of KINDS) {
      const secret = generateSecret(kind)
      expect(secret.startsWith(SECRET_PREFIXES[kind])).toBe(true)
      expect(secret.length).toBe(SECRET_PREFIXES[kind].length + 38)
      expect(isWellFormedSecret(kind, secret)).toBe(true)
      // A secret of one kind is not accepted as another kind.
      for (const other of KINDS.filter((candidate) => candidate !== kind)) {
        expect(isWellFormedSecret(other, secret)).toBe(false)
      }
    }
  })

  test('round trip: every generated secret validates and digests stably', () => {
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), (kind) => {
        const secret = generateSecret(kind)
        return isWellFormedSecret(kind, secret) && digestsEqual(digestSecret(secret), digestSecret(secret))
      }),
      { numRuns: 500 },
    )
  })

  test('any one-character change is rejected', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...KINDS),
        fc.nat(),
        fc.constantFrom(...BASE62.split('')),
        (kind, positionSeed, replacement) => {
          const secret = generateSecret(kind)
          const prefixLength = SECRET_PREFIXES[kind].length
          const position = prefixLength + (positionSeed % (secret.length - prefixLength))
          fc.pre(secret[position] !== replacement)
          const changed = secret.slice(0, position) + replacement + secret.slice(position + 1)
          return !isWellFormedSecret(kind, changed)
        },
      ),
      { numRuns: 2000 },
    )
  })

  test('truncated, extended and wrongly prefixed values are rejected', () => {
    const secret = generateSecret('source_key')
    expect(isWellFormedSecret('source_key', secret.slice(0, -1))).toBe(false)
    expect(isWellFormedSecret('source_key', `${secret}a`)).toBe(false)
    expect(isWellFormedSecret('source_key', secret.replace('flwh_', 'flwx_'))).toBe(false)
    expect(isWellFormedSecret('source_key', '')).toBe(false)
    expect(isWellFormedSecret('source_key', `flwh_${'!'.repeat(38)}`)).toBe(false)
  })

  test('digests are SHA-256 hex and compare in constant time', () => {
    const secret = generateSecret('pat')
    const digest = digestSecret(secret)
    expect(digest).toMatch(/^[0-9a-f]{64}$/)
    expect(digestsEqual(digest, digestSecret(secret))).toBe(true)
    expect(digestsEqual(digest, digestSecret(generateSecret('pat')))).toBe(false)
    expect(digestsEqual(digest, '')).toBe(false)
  })

  test('masking keeps four characters either side and never the whole body', () => {
    const secret = generateSecret('pat')
    const masked = maskSecret(secret)
    expect(masked).toBe(`fl_pat_${secret.slice(7, 11)}…${secret.slice(-4)}`)
    expect(masked).not.toContain(secret.slice(7))
    const text = `POST /api/webhook/lead/${generateSecret('source_key')} by ${secret}`
    const cleaned = maskSecretsInText(text)
    expect(cleaned).toMatch(/\/api\/webhook\/lead\/flwh_[0-9A-Za-z]{4}…[0-9A-Za-z]{4} by fl_pat_/)
    expect(cleaned).not.toContain(secret)
  })
})

describe('maskSecretsInText: every encoding of every character (issue 15 items 7 and 8)', () => {
  const encodeChar = (char: string, how: number) => {
    const code = char.charCodeAt(0)
    if (how === 1) return `%${code.toString(16).toUpperCase().padStart(2, '0')}`
    if (how === 2) return `%${code.toString(16).padStart(2, '0')}`
    if (how === 3) return `%25${code.toString(16).padStart(2, '0')}`
    if (how === 4) return `\\u${code.toString(16).padStart(4, '0')}`
    return char
  }

  // Every kind the service issues: the keys (masked to prefix, first and last four) and the webhook
  // signing secrets (base64, `+/=` included; masked to prefix and first four).
  const issued: Array<{ kind: string; make: () => string; hidden: (secret: string) => string }> = [
    ...KINDS.map((kind) => ({
      kind,
      make: () => generateSecret(kind),
      hidden: (secret: string) => secret.slice(SECRET_PREFIXES[kind].length + 4, -4),
    })),
    {
      kind: 'webhook',
      make: generateWebhookSecret,
      hidden: (secret: string) => secret.slice('whsec_'.length + 4),
    },
  ]

  test('a secret of any kind with any mix of plain, %XX, %25XX and \\uXXXX characters, in any text, is masked', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...issued),
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 50, maxLength: 50 }),
        fc.string({ maxLength: 20 }),
        fc.string({ maxLength: 20 }),
        (kind, hows, before, after) => {
          const secret = kind.make()
          const encoded = [...secret].map((char, index) => encodeChar(char, hows[index]!)).join('')
          // A secret character on either side would make the secret longer, not hidden.
          const text = `${before} ${encoded} ${after}`
          const masked = maskSecretsInText(text)
          const hidden = kind.hidden(secret)
          const decoded = masked
            .replace(/%(?:25)*([0-9A-Fa-f]{2})/g, (_, code) => String.fromCharCode(Number.parseInt(code, 16)))
            .replace(/\\u([0-9A-Fa-f]{4})/g, (_, code) => String.fromCharCode(Number.parseInt(code, 16)))
          return !decoded.includes(hidden) && !masked.includes(hidden)
        },
      ),
      { numRuns: 2000 },
    )
  })

  test('text without a secret is left as it is, encodings included', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 200 }),
        (text) => maskSecretsInText(text) === text || /fl/.test(text),
      ),
      { numRuns: 2000 },
    )
    for (const text of ['/api/x%20y', '{"a":"\\u00e9"}', '%E2%82%AC 100%', 'fl_pat_short']) {
      expect(maskSecretsInText(text)).toBe(text)
    }
  })
})

describe('webhook signing secrets', () => {
  test('whsec_ + base64 of 24 random bytes, masked in free text', () => {
    const secret = generateWebhookSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(24)
    const masked = maskSecretsInText(`rotated to ${secret} today`)
    expect(masked).toBe(`rotated to ${maskWebhookSecret(secret)} today`)
    expect(masked).not.toContain(secret.slice(10))
  })

  test('SecretBox: sealed text reveals nothing, opens to the secret, refuses tampering and other keys', () => {
    const box = new SecretBox(randomBytes(32).toString('base64'))
    const secret = generateWebhookSecret()
    const sealed = box.seal(secret)
    expect(sealed).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/)
    expect(sealed).not.toContain(secret.slice(6))
    expect(box.seal(secret)).not.toBe(sealed)
    expect(box.open(sealed)).toBe(secret)
    const [version, iv, body, tag] = sealed.split('.')
    const flipped = `${body!.slice(0, -2)}${body!.endsWith('AA') ? 'BB' : 'AA'}`
    expect(() => box.open([version, iv, flipped, tag].join('.'))).toThrow()
    expect(() => new SecretBox(randomBytes(32).toString('base64')).open(sealed)).toThrow()
    expect(() => new SecretBox(randomBytes(16).toString('base64'))).toThrow()
  })

  test('key rotation: seals with the current key, opens with any, reseals only what an old key sealed', () => {
    const [oldKey, newKey, otherKey] = [0, 1, 2].map(() => randomBytes(32).toString('base64'))
    const sealedOld = new SecretBox(oldKey!).seal('whsec_old')
    const box = new SecretBox(newKey!, [otherKey!, oldKey!])
    expect(box.open(sealedOld)).toBe('whsec_old')
    const sealedNew = box.seal('whsec_new')
    expect(new SecretBox(newKey!).open(sealedNew)).toBe('whsec_new')
    expect(() => new SecretBox(oldKey!).open(sealedNew)).toThrow(/none of the configured keys/)
    const resealed = box.reseal(sealedOld)
    expect(resealed).not.toBeNull()
    expect(new SecretBox(newKey!).open(resealed!)).toBe('whsec_old')
    expect(box.reseal(sealedNew)).toBeNull()
    // Tampered text opens with no key; a key of the wrong length is refused at once.
    const [version, iv, body, tag] = sealedOld.split('.')
    const flipped = `${version}.${iv}.${body!.startsWith('A') ? `B${body!.slice(1)}` : `A${body!.slice(1)}`}.${tag}`
    expect(() => box.open(flipped)).toThrow(/none of the configured keys/)
    expect(() => new SecretBox(newKey!, [randomBytes(16).toString('base64')])).toThrow(/32 bytes/)
  })

  test('without WEBHOOK_SECRETS_KEY a key is made once in DATA_DIR (mode 0600) and kept', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'secrets-key-'))
    try {
      const first = openSecretBox({ webhookSecretsKey: undefined, dataDir })
      const sealed = first.box.seal('whsec_x')
      const second = openSecretBox({ webhookSecretsKey: undefined, dataDir })
      expect(second.source).toBe('data_dir')
      expect(second.box.open(sealed)).toBe('whsec_x')
      expect(statSync(join(dataDir, SECRETS_KEY_FILE)).mode & 0o777).toBe(0o600)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
