import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildTracker, TRACKER_GZIP_BUDGET_BYTES, TrackerBuildError } from '../../src/tracker/build'
import { acceptsGzip } from '../../src/tracker/serve'

const scratch = mkdtempSync(join(tmpdir(), 'tracker-build-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('tracker.js build', () => {
  test(`is at most ${TRACKER_GZIP_BUDGET_BYTES} bytes gzipped (figure printed)`, async () => {
    const tracker = await buildTracker()
    console.log(`tracker.js: ${tracker.rawBytes} bytes raw, ${tracker.gzipBytes} bytes gzipped`)
    expect(tracker.gzipBytes).toBeLessThanOrEqual(TRACKER_GZIP_BUDGET_BYTES)
    expect(tracker.gzipBytes).toBe(tracker.gzipped.byteLength)
    expect(new TextDecoder().decode(Bun.gunzipSync(tracker.gzipped))).toBe(tracker.code)
  })

  test('is one self-contained IIFE: only window.LeadCapture reaches the page, no secrets, no imports', async () => {
    const { code, etag } = await buildTracker()
    expect(code.startsWith('(()=>{')).toBe(true)
    expect(code).not.toMatch(/\bimport\s*[({"']|\brequire\(|\bexport\s/)
    expect(code).not.toMatch(/flwh_|fl_pat_|fl_sess_/)
    expect(code).toContain('LeadCapture')
    // Minified: no comments or indentation survive.
    expect(code).not.toContain('/**')
    expect(code.split('\n').length).toBeLessThanOrEqual(2)
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/)
  })

  test('the same source gives the same ETag; a change gives another', async () => {
    const first = await buildTracker()
    const second = await buildTracker()
    expect(second.etag).toBe(first.etag)
    const entry = join(scratch, 'other.ts')
    writeFileSync(entry, 'console.log("other")\n')
    expect((await buildTracker(entry)).etag).not.toBe(first.etag)
  })

  test('a broken source fails with a TrackerBuildError that names the file and the problem', async () => {
    const entry = join(scratch, 'broken.ts')
    writeFileSync(entry, 'const x = ;\n')
    const failure = await buildTracker(entry).then(
      () => null,
      (error: unknown) => error,
    )
    expect(failure).toBeInstanceOf(TrackerBuildError)
    expect((failure as Error).message).toContain(`tracker.js could not be built from ${entry}`)
    expect((failure as Error).message).toMatch(/Unexpected/)

    const missing = join(scratch, 'missing.ts')
    const notFound = await buildTracker(missing).then(
      () => null,
      (error: unknown) => error as Error,
    )
    expect(notFound).toBeInstanceOf(TrackerBuildError)
    expect(notFound?.message).toContain(missing)
  })
})

describe('Accept-Encoding', () => {
  test.each([
    [undefined, false],
    ['', false],
    ['gzip', true],
    ['gzip, deflate, br, zstd', true],
    ['br;q=1.0, GZIP;q=0.5', true],
    ['gzip;q=0', false],
    ['gzip;q=0.000', false],
    ['identity', false],
    ['x-gzip', true],
    ['*', false],
  ])('%p → %p', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected)
  })
})
