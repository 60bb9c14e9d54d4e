import { errors } from './errors'

const INVISIBLE_ONLY = /^[\s\p{Cc}\p{Cf}\p{Z}]*$/u

/**
 * Display names (organizations, sources, tokens) are stored trimmed, and one that is empty once
 * trimmed, or only invisible characters, is refused: `" "` is not a name anyone can pick from a list.
 */
export function cleanName(name: string): string | null {
  const trimmed = name.trim()
  return trimmed && !INVISIBLE_ONLY.test(trimmed) ? trimmed : null
}

/** cleanName, or a 400 `validation_failed` naming the field (`path` is its JSON pointer). */
export function requireName(name: string, path: string): string {
  const cleaned = cleanName(name)
  if (cleaned) return cleaned
  const message = 'must not be empty or only spaces'
  throw errors.validation(`${path.slice(1).replaceAll('/', '.')} ${message}`, [{ path, message }])
}
