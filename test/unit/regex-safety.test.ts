import { describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { checkSync } from 'recheck'
import ts from 'typescript'

/**
 * Every regular expression written in src/ is checked with recheck (a ReDoS checker) for backtracking
 * that grows faster than its input. The inbound path runs patterns over request bodies of up to
 * 100 KB on the one event loop, and tracker.js over what visitors type: a quadratic pattern there
 * holds every request of the replica (a 60 KB field name of capitals held it 2.6 s through the
 * card-name tokenizer) or the visitor's page. A pattern recheck flags must either be rewritten or be
 * listed below with the reason its input is bounded; a listed pattern that is gone or no longer
 * flagged fails too, so the list stays true. Patterns built at run time (`new RegExp(…)`) are not
 * literals: test/helpers/built-patterns.ts records them where they are built, in a process of its
 * own, and every such site in src/ must have been recorded (so each is checked as it really is).
 */
const SRC = join(import.meta.dir, '../../src')

/** `file:/source/`: why the input a flagged pattern sees is short. */
const BOUNDED: Record<string, string> = {
  'tracker/browser/tracker.ts:/^.*\\[([^\\]]+)\\]$/': "a form field's name, from the page's own markup",
  'tracker/browser/tracker.ts:/^(input|field|item)?[-_]?([0-9a-f]*\\d[0-9a-f._]*)?$/i':
    "a form field's name, from the page's own markup",
  'tracker/browser/tracker.ts:/_+$/': "a form field's name, from the page's own markup",
  'tracker/browser/tracker.ts:/([^[\\]]*)\\]?$/': "a form field's name, from the page's own markup",
  'config.ts:/\\/+$/': "the operator's own setting, read once at start-up",
  'lib/route-templates.ts:/\\/+$/': "the service's own route paths, read once at start-up",
  'lib/ip.ts:/(\\d+\\.\\d+\\.\\d+\\.\\d+)$/':
    'an address node:net isIP() has accepted as IPv6, zone removed: 45 characters at most',
  'lib/contact.ts:/^[^\\s@"<>(),;:]+@[^\\s@"<>(),;:]+\\.[^\\s@"<>(),;:]{2,}$/':
    'tested only on an address of 254 characters or fewer (normalizeEmail)',
}

interface Literal {
  key: string
  source: string
  flags: string
}

/** Every TypeScript file of src/, parsed, with its path relative to src/. */
function sourceFiles(): Array<{ name: string; file: ts.SourceFile }> {
  const files: Array<{ name: string; file: ts.SourceFile }> = []
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith('.ts')) {
        const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true)
        files.push({ name: relative(SRC, path), file })
      }
    }
  }
  walk(SRC)
  return files
}

/** Calls `visit` with every node of every file of src/. */
function eachNode(visit: (node: ts.Node, file: ts.SourceFile, name: string) => void): void {
  for (const { name, file } of sourceFiles()) {
    const walk = (node: ts.Node) => {
      visit(node, file, name)
      ts.forEachChild(node, walk)
    }
    walk(file)
  }
}

function literals(): Literal[] {
  const found: Literal[] = []
  eachNode((node, file, name) => {
    if (node.kind !== ts.SyntaxKind.RegularExpressionLiteral) return
    const text = node.getText(file)
    const end = text.lastIndexOf('/')
    found.push({ key: `${name}:${text}`, source: text.slice(1, end), flags: text.slice(end + 1) })
  })
  return found
}

describe('regular expressions in src/', () => {
  const all = literals()

  test('none backtracks more than linearly, but the reviewed ones on bounded input', () => {
    // A sanity check of the scan itself: it reads the patterns, and recheck tells a quadratic one.
    expect(all.length).toBeGreaterThan(50)
    expect(checkSync('([A-Z]+)([A-Z][a-z])', '').status).toBe('vulnerable')
    const flagged: Record<string, string> = {}
    for (const { key, source, flags } of all) {
      // `g` and `y` change where a match starts, not how one attempt backtracks.
      const result = checkSync(source, flags.replace(/[gy]/g, ''), { timeout: 10_000 })
      if (result.status !== 'safe') {
        const complexity =
          result.status === 'vulnerable'
            ? `${result.complexity.type} ${result.complexity.summary}`
            : 'unknown'
        flagged[key] = complexity
      }
    }
    expect(Object.keys(flagged).filter((key) => !(key in BOUNDED))).toEqual([])
    expect(Object.keys(BOUNDED).filter((key) => !(key in flagged))).toEqual([])
  }, 120_000)

  test('patterns built at run time: every site in src/ recorded, none backtracks more than linearly', () => {
    const sites = new Set<string>()
    eachNode((node, file, name) => {
      if (
        (ts.isNewExpression(node) || ts.isCallExpression(node)) &&
        ts.isIdentifier(node.expression) &&
        node.expression.text === 'RegExp'
      ) {
        sites.add(`${name}:${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}`)
      }
    })
    expect(sites.size).toBeGreaterThan(0)

    const run = Bun.spawnSync(['bun', join(import.meta.dir, '../helpers/built-patterns.ts')], {
      stdout: 'pipe',
      stderr: 'pipe',
      env: { ...process.env, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent' },
    })
    expect(run.exitCode).toBe(0)
    const recorded = JSON.parse(run.stdout.toString().trim().split('\n').at(-1)!) as Array<{
      site: string
      source: string
      flags: string
    }>
    expect([...new Set(recorded.map((pattern) => pattern.site))].sort()).toEqual([...sites].sort())

    const flagged: string[] = []
    const checked = new Set<string>()
    for (const { site, source, flags } of recorded) {
      if (checked.has(`${flags}/${source}`)) continue
      checked.add(`${flags}/${source}`)
      const result = checkSync(source, flags.replace(/[gy]/g, ''), { timeout: 10_000 })
      if (result.status !== 'safe') flagged.push(`${site}: /${source}/${flags}`)
    }
    // The route patterns of the rate-limit plugin alone are a hundred or more: all were checked.
    expect(checked.size).toBeGreaterThan(50)
    expect(flagged).toEqual([])
  }, 120_000)
})
