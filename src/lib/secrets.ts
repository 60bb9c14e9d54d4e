import { createCipheriv, createDecipheriv, randomBytes, timingSafeEqual } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * The one home of raw secret bytes: generation, checksum, digest, comparison and masking.
 *
 * Format: prefix + 32 random base62 characters + 6 base62 characters of the CRC32 of the random
 * part. The checksum lets a typo'd or truncated key be rejected before any I/O; the random part
 * carries ~190 bits of entropy. Only SHA-256 digests are stored.
 */
export const SECRET_PREFIXES = {
  source_key: 'flwh_',
  pat: 'fl_pat_',
  session: 'fl_sess_',
} as const

export type SecretKind = keyof typeof SECRET_PREFIXES

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const RANDOM_LENGTH = 32
const CHECKSUM_LENGTH = 6
const BODY_LENGTH = RANDOM_LENGTH + CHECKSUM_LENGTH
const BODY_PATTERN = new RegExp(`^[0-9A-Za-z]{${BODY_LENGTH}}$`)

function randomBase62(length: number): string {
  // Rejection sampling keeps every character uniformly distributed (256 is not a multiple of 62).
  let out = ''
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62]
    }
  }
  return out
}

function checksum(randomPart: string): string {
  let value = Bun.hash.crc32(randomPart)
  let out = ''
  for (let index = 0; index < CHECKSUM_LENGTH; index++) {
    out = ALPHABET[value % 62] + out
    value = Math.floor(value / 62)
  }
  return out
}

export function generateSecret(kind: SecretKind): string {
  const randomPart = randomBase62(RANDOM_LENGTH)
  return SECRET_PREFIXES[kind] + randomPart + checksum(randomPart)
}

/** Prefix, length, alphabet and checksum: everything that can be checked without I/O. */
export function isWellFormedSecret(kind: SecretKind, value: string): boolean {
  const prefix = SECRET_PREFIXES[kind]
  if (value.length !== prefix.length + BODY_LENGTH || !value.startsWith(prefix)) return false
  const body = value.slice(prefix.length)
  if (!BODY_PATTERN.test(body)) return false
  return checksum(body.slice(0, RANDOM_LENGTH)) === body.slice(RANDOM_LENGTH)
}

export function secretKindOf(value: string): SecretKind | null {
  for (const kind of Object.keys(SECRET_PREFIXES) as SecretKind[]) {
    if (value.startsWith(SECRET_PREFIXES[kind])) return kind
  }
  return null
}

/** Hex SHA-256 of the whole secret: what the database stores and indexes. */
export function digestSecret(value: string): string {
  return new Bun.CryptoHasher('sha256').update(value).digest('hex')
}

export function digestsEqual(left: string, right: string): boolean {
  const a = Buffer.from(left, 'hex')
  const b = Buffer.from(right, 'hex')
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b)
}

/** `flwh_AbCd…WxYz`: enough to recognise a key, never enough to use it. */
export function maskSecret(value: string): string {
  const kind = secretKindOf(value)
  const prefix = kind ? SECRET_PREFIXES[kind] : ''
  const body = value.slice(prefix.length)
  if (body.length < 12) return `${prefix}…`
  return `${prefix}${body.slice(0, 4)}…${body.slice(-4)}`
}

export function maskFromParts(kind: SecretKind, first4: string, last4: string): string {
  return `${SECRET_PREFIXES[kind]}${first4}…${last4}`
}

/** The first and last four characters of the body, stored to show a masked value later. */
export function secretHints(value: string): { first4: string; last4: string } {
  const kind = secretKindOf(value)
  const body = value.slice(kind ? SECRET_PREFIXES[kind].length : 0)
  return { first4: body.slice(0, 4), last4: body.slice(-4) }
}

/**
 * Every secret the service issues, as text: a key (`flwh_`, `fl_pat_`, `fl_sess_` + base62; masked to
 * its prefix, first and last four) or a webhook signing secret (`whsec_` + base64; masked to its
 * prefix and first four, as maskWebhookSecret shows it).
 */
const ANY_SECRET =
  /(flwh_|fl_pat_|fl_sess_)([0-9A-Za-z]{4})[0-9A-Za-z]{4,}([0-9A-Za-z]{4})|whsec_([A-Za-z0-9+/]{4})[A-Za-z0-9+/]{4,}={0,2}/g
const maskOf = (match: ReadonlyArray<string | undefined>): string =>
  match[1] === undefined ? `whsec_${match[4]}…` : `${match[1]}${match[2]}…${match[3]}`

/**
 * A run of characters that may spell a secret once decoded: secret characters written as they
 * are (base64's `+/=` included), percent-encoded (`%42`, or double-encoded `%2542`) or as JSON /
 * JavaScript `\uXXXX` escapes. `flwh_%42Fd…` in a path and `"\u0066l_pat_…"` in a body are as usable
 * as the plain key.
 */
const ENCODED_RUN = /(?:[0-9A-Za-z_+/=]|%(?:25)*[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4})+/g
const ENCODED_UNIT = /[0-9A-Za-z_+/=]|%(?:25)*([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})/g

/**
 * Masks every secret-looking token in free text (paths, log lines, stored request facts), also when
 * it is percent-encoded or `\u`-escaped. Only the characters of the secret are replaced (by its
 * plain mask); everything around it keeps its encoding, so a masked path is still a path and a
 * masked JSON text still parses.
 */
export function maskSecretsInText(text: string): string {
  // Text with no secret prefix and no escape (a request id, most values) skips the patterns.
  if (!mayHoldSecret(text)) return text
  const plain = text.replace(ANY_SECRET, (...match: string[]) => maskOf(match))
  if (!plain.includes('%') && !plain.includes('\\u')) return plain
  return plain.replace(ENCODED_RUN, maskEncodedRun)
}

function maskEncodedRun(run: string): string {
  if (!run.includes('%') && !run.includes('\\')) return run
  // Each unit decodes to exactly one UTF-16 code unit, so decoded offsets index `units`.
  const units: string[] = []
  let decoded = ''
  for (const unit of run.matchAll(ENCODED_UNIT)) {
    units.push(unit[0])
    const hex = unit[1] ?? unit[2]
    decoded += hex === undefined ? unit[0] : String.fromCharCode(Number.parseInt(hex, 16))
  }
  let out = ''
  let at = 0
  for (const match of decoded.matchAll(ANY_SECRET)) {
    out += units.slice(at, match.index).join('') + maskOf(match)
    at = match.index + match[0].length
  }
  return at === 0 ? run : out + units.slice(at).join('')
}

/**
 * Outbound webhook signing secrets (Standard Webhooks): `whsec_` + base64 of 24 random bytes. Unlike
 * the keys above they cannot be stored as digests (the service must sign with them), so they are
 * stored encrypted by a SecretBox.
 */
export const WEBHOOK_SECRET_PREFIX = 'whsec_'
const WEBHOOK_SECRET_BYTES = 24

export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(WEBHOOK_SECRET_BYTES).toString('base64')
}

/**
 * Whether text can hold a secret of any kind above: one of the prefixes written as it is, or an
 * escape (`%`, `\`) that could spell one. Text with none needs no masking (a cheap first look, built
 * from the prefixes so a new kind is looked for too): maskSecretsInText and the inbound body's walk.
 */
const MAYBE_SECRET = new RegExp(
  [...Object.values(SECRET_PREFIXES), WEBHOOK_SECRET_PREFIX, '\\\\', '%'].join('|'),
)
export function mayHoldSecret(text: string): boolean {
  return MAYBE_SECRET.test(text)
}

/** `whsec_AbCd…`: what logs and lists may show of a signing secret. */
export function maskWebhookSecret(secret: string): string {
  return `${secret.slice(0, WEBHOOK_SECRET_PREFIX.length + 4)}…`
}

const CIPHER = 'aes-256-gcm'
const SEALED_VERSION = 'v1'
const IV_BYTES = 12
export const SECRETS_KEY_FILE = 'webhook-secrets.key'

/**
 * Authenticated encryption (AES-256-GCM) of secrets that must be read back. Sealed text is
 * `v1.<iv>.<ciphertext>.<tag>` (base64url): a database dump holds only that, and a row copied to
 * another organization's column still decrypts, so ownership is checked by the queries, not here.
 *
 * Key rotation: the box seals with its current key and opens with any of its keys (the current,
 * then the previous ones: GCM's tag tells a wrong key), so after a new key is configured with the
 * old ones as previous, every secret still opens; `reseal` re-encrypts one with the current key
 * (`bun run cli webhooks reseal` does it for every endpoint), after which the old keys can go.
 */
export class SecretBox {
  private readonly keys: Buffer[]

  constructor(keyBase64: string, previousKeysBase64: readonly string[] = []) {
    this.keys = [keyBase64, ...previousKeysBase64].map((text) => {
      const key = Buffer.from(text, 'base64')
      if (key.length !== 32) throw new Error('the secrets key must be 32 bytes, base64-encoded')
      return key
    })
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv(CIPHER, this.keys[0]!, iv)
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
    return [SEALED_VERSION, iv, body, cipher.getAuthTag()]
      .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
      .join('.')
  }

  open(sealed: string): string {
    return this.unseal(sealed).plain
  }

  /** The secret sealed again with the current key, or null when it already is. */
  reseal(sealed: string): string | null {
    const { plain, keyIndex } = this.unseal(sealed)
    return keyIndex === 0 ? null : this.seal(plain)
  }

  private unseal(sealed: string): { plain: string; keyIndex: number } {
    const [version, iv, body, tag] = sealed.split('.')
    if (version !== SEALED_VERSION || !iv || body === undefined || !tag) {
      throw new Error('not a sealed secret')
    }
    for (const [keyIndex, key] of this.keys.entries()) {
      const decipher = createDecipheriv(CIPHER, key, Buffer.from(iv, 'base64url'))
      decipher.setAuthTag(Buffer.from(tag, 'base64url'))
      try {
        const plain = Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()])
        return { plain: plain.toString('utf8'), keyIndex }
      } catch {
        // Not this key (or tampered): the next one.
      }
    }
    throw new Error(
      'a sealed secret opens with none of the configured keys (WEBHOOK_SECRETS_KEY, WEBHOOK_SECRETS_PREVIOUS_KEYS)',
    )
  }
}

/**
 * The configured key, else the one kept in `DATA_DIR/webhook-secrets.key` (made on first use, mode
 * 0600). Replicas on one PostgreSQL must share a key: set WEBHOOK_SECRETS_KEY for them.
 */
export function openSecretBox(config: {
  webhookSecretsKey: string | undefined
  webhookSecretsPreviousKeys?: readonly string[]
  dataDir: string
}): {
  box: SecretBox
  source: 'config' | 'data_dir'
} {
  const previous = config.webhookSecretsPreviousKeys ?? []
  if (config.webhookSecretsKey)
    return { box: new SecretBox(config.webhookSecretsKey, previous), source: 'config' }
  const path = join(config.dataDir, SECRETS_KEY_FILE)
  if (!existsSync(path)) {
    mkdirSync(config.dataDir, { recursive: true })
    // `wx`: two processes starting together never overwrite each other's key.
    try {
      writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { flag: 'wx', mode: 0o600 })
    } catch (error) {
      if ((error as { code?: string }).code !== 'EEXIST') throw error
    }
  }
  chmodSync(path, 0o600)
  return { box: new SecretBox(readFileSync(path, 'utf8').trim(), previous), source: 'data_dir' }
}
