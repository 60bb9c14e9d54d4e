/**
 * The one home of the password rules (NIST SP 800-63B §3.1.1.2), applied wherever a password is
 * chosen: sign-up, a member added by someone else, the CLI. Log-in does not apply them, so an
 * account made before a rule existed can still sign in.
 *
 * - Length is counted in Unicode code points, not UTF-16 units: four emoji are four characters.
 * - At least 8, at most 128: long enough for any passphrase, short enough that hashing an
 *   attacker's maximum-length password costs no more than a normal one (argon2id is given at most
 *   512 bytes).
 * - Not only whitespace or invisible characters.
 * - Not on the common-password list of `@zxcvbn-ts/language-common` (~49,000 entries from breach
 *   corpora, maintained by the zxcvbn-ts project), compared case-insensitively and trimmed.
 * No composition rules (digits, symbols) and no forced rotation: 800-63B advises against both.
 */
export const PASSWORD_MIN_CHARACTERS = 8
export const PASSWORD_MAX_CHARACTERS = 128

const INVISIBLE_ONLY = /^[\s\p{Cc}\p{Cf}\p{Z}]*$/u

let commonPasswords: Promise<Set<string>> | undefined

/** Loaded on first use: the list is ~380 KB compressed and not needed to serve leads. */
function loadCommonPasswords(): Promise<Set<string>> {
  commonPasswords ??= import('@zxcvbn-ts/language-common').then(
    ({ dictionary }) => new Set(dictionary['passwords-common']),
  )
  return commonPasswords
}

/** Why the password is refused, in words for the caller; null when it is acceptable. */
export async function passwordProblem(password: string): Promise<string | null> {
  let characters = 0
  for (const _ of password) {
    characters++
    if (characters > PASSWORD_MAX_CHARACTERS) break
  }
  if (characters < PASSWORD_MIN_CHARACTERS) {
    return `must be at least ${PASSWORD_MIN_CHARACTERS} characters (Unicode code points)`
  }
  if (characters > PASSWORD_MAX_CHARACTERS) return `must be at most ${PASSWORD_MAX_CHARACTERS} characters`
  if (INVISIBLE_ONLY.test(password)) return 'must not be only spaces or invisible characters'
  if ((await loadCommonPasswords()).has(password.trim().toLowerCase())) {
    return 'is too common: it is on a list of passwords used in breaches; choose another'
  }
  return null
}
