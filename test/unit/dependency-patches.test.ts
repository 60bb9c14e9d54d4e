import { describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Patched dependencies (package.json `patchedDependencies`, patches/README.md): `bun install`
 * applies each patch to the version it names. A patch missing from an install is a fix silently
 * lost (postgres.js' patch keeps a replica alive when the server ends a session in a transaction:
 * test/integration/database-ended-sessions.test.ts), so each is checked where it has to arrive:
 * this checkout's node_modules, and the Dockerfile's install, which sees only what it copies.
 */
const ROOT = join(import.meta.dir, '../..')
const patched =
  (
    JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      patchedDependencies?: Record<string, string>
    }
  ).patchedDependencies ?? {}
const entries = Object.entries(patched).map(([spec, path]) => {
  const at = spec.lastIndexOf('@')
  return { name: spec.slice(0, at), version: spec.slice(at + 1), path }
})

/** The files a patch changes, and a line it adds to each (`+++ b/<file>` and its first `+` line). */
function addedLines(patch: string): Array<{ file: string; line: string }> {
  return patch
    .split(/^diff --git /m)
    .slice(1)
    .map((part) => ({
      file: /^\+\+\+ b\/(.+)$/m.exec(part)![1]!,
      line: /^\+(?!\+\+)(.*\S.*)$/m.exec(part)![1]!,
    }))
}

describe('patched dependencies', () => {
  test('postgres.js is patched (the list this test walks is not empty)', () => {
    expect(entries.map(({ name }) => name)).toContain('postgres')
  })

  test.each(entries.map((entry) => [`${entry.name}@${entry.version}`, entry]))(
    '%s: installed at that version, every file of the patch changed as it says',
    (_spec, { name, version, path }) => {
      const installed = JSON.parse(
        readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8'),
      ) as {
        version: string
      }
      expect(installed.version).toBe(version)
      const changes = addedLines(readFileSync(join(ROOT, path), 'utf8'))
      expect(changes.length).toBeGreaterThan(0)
      for (const { file, line } of changes) {
        expect(readFileSync(join(ROOT, 'node_modules', name, file), 'utf8')).toContain(line)
      }
    },
  )

  test("the Dockerfile's dependency stage copies every patch before it installs", () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    const stage = dockerfile.split(/^FROM /m).find((part) => /^RUN bun install/m.test(part))!
    const beforeInstall = stage.slice(0, stage.search(/^RUN bun install/m))
    const copied = [...beforeInstall.matchAll(/^COPY (.+) (\S+)$/gm)].flatMap((match) =>
      match[1]!.split(/\s+/),
    )
    for (const { path } of entries) {
      expect(existsSync(join(ROOT, path))).toBe(true)
      expect(
        copied.some((source) => path === source || path.startsWith(`${source.replace(/\/$/, '')}/`)),
      ).toBe(true)
    }
  })
})
