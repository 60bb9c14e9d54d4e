/**
 * Run as its own process by test/unit/regex-safety.test.ts (`bun test/helpers/built-patterns.ts`):
 * every regular expression src/ builds at run time (`new RegExp(…)` or `RegExp(…)`, which are not
 * literals the test can read), recorded where it is built. A fresh process, so that every module's
 * own patterns are built after the recorder is in place (a test process has them cached already).
 * It replaces the global RegExp with a recording proxy, imports every module of src/ but the
 * entry points and the browser code, builds the app once (the rate-limit plugin builds its route
 * patterns then), and prints one JSON line: [{ site: 'file.ts:line', source, flags }].
 */
import { readdirSync } from 'node:fs'
import { join, relative } from 'node:path'

const SRC = join(import.meta.dir, '../../src')
/** Scripts that run when imported, and code for the browser. */
const NOT_IMPORTED = ['index.ts', 'db/migrate-cli.ts', 'tracker/size.ts', 'tracker/browser/']

const recorded: Array<{ site: string; source: string; flags: string }> = []
const record = (pattern: RegExp) => {
  // The caller: the first frame with a file that is not this one. A pattern a library builds for
  // src/ (TypeBox compiling a schema's pattern) is the library's, not a site in src/.
  const frame = (new Error().stack ?? '')
    .split('\n')
    .map((line) => line.match(/\((\/[^)]+):(\d+):\d+\)\s*$/) ?? line.match(/at (\/\S+):(\d+):\d+\s*$/))
    .find((match) => match?.[1] && match[1] !== import.meta.path)
  if (frame?.[1]?.startsWith(`${SRC}/`)) {
    recorded.push({
      site: `${relative(SRC, frame[1])}:${frame[2]}`,
      source: pattern.source,
      flags: pattern.flags,
    })
  }
  return pattern
}
const Original = RegExp
globalThis.RegExp = new Proxy(Original, {
  construct: (target, args, newTarget) => record(Reflect.construct(target, args, newTarget)),
  apply: (target, self, args) => record(Reflect.apply(target, self, args)),
}) as RegExpConstructor

const modules: string[] = []
const walk = (dir: string) => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    const name = relative(SRC, path) + (entry.isDirectory() ? '/' : '')
    if (NOT_IMPORTED.some((excluded) => name === excluded || name.startsWith(excluded))) continue
    if (entry.isDirectory()) walk(path)
    else if (entry.name.endsWith('.ts')) modules.push(path)
  }
}
walk(SRC)
for (const module of modules) await import(module)

// loadConfig builds one only for WEBHOOK_SECRETS_PREVIOUS_KEYS
const { loadConfig } = await import('../../src/config')
loadConfig({ WEBHOOK_SECRETS_PREVIOUS_KEYS: `${'A'.repeat(43)}=` })
const { makeTestApp } = await import('./test-app')
const { app, ctx } = await makeTestApp()
await app.handle(new Request('http://localhost/healthz'))
await ctx.close()

console.log(JSON.stringify(recorded))
process.exit(0)
