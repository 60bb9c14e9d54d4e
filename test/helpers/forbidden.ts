/**
 * What of `values` (as a whole leaf value, or inside one) and of `names` (as a key, any case) a JSON
 * body holds, with the path where it was found. Empty when the body is clean.
 *
 * Checked on the parsed body's leaves, never as substrings of the raw text: a short secret such as
 * a CVV `987` also occurs by chance in the random UUIDs, timestamps and `_elapsed_ms` of a body.
 */
export function forbiddenIn(json: string, values: readonly string[], names: readonly string[]): string[] {
  const found: string[] = []
  const forbiddenNames = new Set(names.map((name) => name.toLowerCase()))
  const visit = (node: unknown, path: string): void => {
    if (typeof node === 'string') {
      // A short value (a CVV) only counts as a whole value; a long one also inside a longer string.
      for (const value of values) {
        if (node === value || (value.length >= 8 && node.includes(value))) found.push(`${path}: ${value}`)
      }
    } else if (typeof node === 'number') {
      if (values.includes(String(node))) found.push(`${path}: ${node}`)
    } else if (node && typeof node === 'object') {
      for (const [key, child] of Object.entries(node)) {
        if (forbiddenNames.has(key.toLowerCase())) found.push(`${path}/${key}`)
        visit(child, `${path}/${key}`)
      }
    }
  }
  visit(JSON.parse(json), '')
  return found
}
