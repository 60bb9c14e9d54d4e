import { join } from 'node:path'

/** The website script as served: built once, kept in memory (DESIGN §9). */
export interface BuiltTracker {
  code: string
  /** The same bytes gzipped once at build time, so each response costs no compression. */
  gzipped: Uint8Array<ArrayBuffer>
  /** Strong validator of the script's content (identity encoding). */
  etag: string
  rawBytes: number
  gzipBytes: number
}

/** Budget for the gzipped script (DESIGN §9); a unit test keeps the build under it. */
export const TRACKER_GZIP_BUDGET_BYTES = 3072

export const TRACKER_ENTRY = join(import.meta.dir, 'browser', 'tracker.ts')

export class TrackerBuildError extends Error {
  constructor(entry: string, message: string, options?: { cause?: unknown }) {
    super(`tracker.js could not be built from ${entry}: ${message}`, options)
    this.name = 'TrackerBuildError'
  }
}

/**
 * Bundles the browser source into one minified IIFE (its variables stay out of the page's globals).
 * Bun.build throws an AggregateError of build messages; they are folded into one readable message.
 */
export async function buildTracker(entry: string = TRACKER_ENTRY): Promise<BuiltTracker> {
  let output: Awaited<ReturnType<typeof Bun.build>>
  try {
    output = await Bun.build({
      entrypoints: [entry],
      target: 'browser',
      format: 'iife',
      minify: true,
      sourcemap: 'none',
    })
  } catch (error) {
    throw new TrackerBuildError(entry, describeBuildError(error), { cause: error })
  }
  const [artifact] = output.outputs
  if (!output.success || !artifact || output.outputs.length !== 1) {
    throw new TrackerBuildError(
      entry,
      output.logs.map(String).join('; ') || 'the build produced no single output',
    )
  }
  const code = await artifact.text()
  const raw = new TextEncoder().encode(code)
  const gzipped = Bun.gzipSync(raw, { level: 9 }) as Uint8Array<ArrayBuffer>
  const digest = new Bun.CryptoHasher('sha256').update(raw).digest('base64url')
  return {
    code,
    gzipped,
    etag: `"${digest.slice(0, 27)}"`,
    rawBytes: raw.byteLength,
    gzipBytes: gzipped.byteLength,
  }
}

function describeBuildError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(describeBuildMessage).join('; ')
  }
  return error instanceof Error ? error.message : String(error)
}

// `Unexpected ; at /…/tracker.ts:212:16`: where to look, not just what went wrong.
function describeBuildMessage(message: unknown): string {
  const { position } = message as { position?: { file: string; line: number; column: number } | null }
  const text = message instanceof Error ? message.message : String(message)
  return position ? `${text} at ${position.file}:${position.line}:${position.column}` : text
}
