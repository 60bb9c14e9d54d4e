import { describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'

/**
 * Every database connection of a replica is opened in src/db/, where each starts with the pools'
 * settings (DATABASE_LOCK_TIMEOUT_MS) and is watched for a server that vanished
 * (DATABASE_UNANSWERED_CHECK_MS, src/db/renewable-pool.ts); a module that needs a connection of its
 * own asks the handle for one (DatabaseHandle.openSession). The log retention opened its own
 * postgres.js client: no lock_timeout, nothing watching it, so on a host that vanished its run, and
 * with it the replica's shutdown, waited until TCP gave up. This walks src/ (the TypeScript
 * compiler's syntax tree, so comments and strings do not count) for anything that could open a
 * connection outside src/db/: a value import of a database client's package, Bun's `SQL` or
 * `Bun.sql`, and their dynamic imports.
 */
const SRC = join(import.meta.dir, '../../src')
const CLIENT_PACKAGES = new Set([
  'postgres',
  '@electric-sql/pglite',
  'drizzle-orm/postgres-js',
  'drizzle-orm/pglite',
])

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

/** `file:line what` for every place in `path` that can open a database connection. */
function connectionOpeners(path: string): string[] {
  const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true)
  const found: string[] = []
  const at = (node: ts.Node, what: string) =>
    found.push(
      `${relative(SRC, path)}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1} ${what}`,
    )
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const module = node.moduleSpecifier.text
      const clause = node.importClause
      if (clause && !clause.isTypeOnly) {
        if (CLIENT_PACKAGES.has(module)) at(node, `imports '${module}'`)
        const named = clause.namedBindings
        if (module === 'bun' && named && ts.isNamedImports(named)) {
          for (const element of named.elements)
            if (!element.isTypeOnly && (element.propertyName ?? element.name).text === 'SQL')
              at(node, "imports SQL from 'bun'")
        }
      }
    }
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0]) &&
      CLIENT_PACKAGES.has(node.arguments[0].text)
    )
      at(node, `import('${node.arguments[0].text}')`)
    if (ts.isPropertyAccessExpression(node) && node.getText(file) === 'Bun.sql') at(node, 'Bun.sql')
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

describe('database connections', () => {
  test('are opened in src/db/ only: nothing else imports a client or Bun.sql', () => {
    const outside = sourceFiles(SRC)
      .filter((path) => !relative(SRC, path).startsWith('db/'))
      .flatMap(connectionOpeners)
    expect(outside).toEqual([])
  })

  test('the walk sees what it looks for (src/db/ opens them)', () => {
    const inDb = sourceFiles(join(SRC, 'db')).flatMap(connectionOpeners)
    expect(inDb).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^db\/client\.ts:\d+ imports 'postgres'$/),
        expect.stringMatching(/^db\/client\.ts:\d+ import\('@electric-sql\/pglite'\)$/),
        expect.stringMatching(/^db\/bun-sql\.ts:\d+ imports SQL from 'bun'$/),
      ]),
    )
  })
})
