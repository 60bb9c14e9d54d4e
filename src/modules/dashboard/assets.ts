import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'

/**
 * The dashboard's scripts and styles, from pinned npm packages and this folder, read once and
 * served by the service itself: no CDN, works offline. Names are fixed (no path from the request
 * reaches the file system); an ETag lets a browser revalidate cheaply.
 */
const SOURCES: Record<string, { path: string; type: string }> = {
  'htmx.min.js': { path: resolvePackageFile('htmx.org/dist/htmx.min.js'), type: 'text/javascript' },
  'uPlot.iife.min.js': { path: resolvePackageFile('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript' },
  'uPlot.min.css': { path: resolvePackageFile('uplot/dist/uPlot.min.css'), type: 'text/css' },
  'dashboard.js': {
    path: fileURLToPath(new URL('./browser/dashboard.js', import.meta.url)),
    type: 'text/javascript',
  },
  'dashboard.css': {
    path: fileURLToPath(new URL('./browser/dashboard.css', import.meta.url)),
    type: 'text/css',
  },
}

function resolvePackageFile(specifier: string): string {
  return Bun.resolveSync(specifier, import.meta.dir)
}

export interface Asset {
  body: Uint8Array<ArrayBuffer>
  type: string
  etag: string
}

export async function loadAssets(): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>()
  for (const [name, source] of Object.entries(SOURCES)) {
    const body = new Uint8Array(await Bun.file(source.path).arrayBuffer())
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"`
    assets.set(name, { body, type: `${source.type}; charset=utf-8`, etag })
  }
  return assets
}

export const ASSET_NAMES = Object.keys(SOURCES)
