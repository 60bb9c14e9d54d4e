import { Elysia, t } from 'elysia'
import { TRACKER_PATH } from '../lib/http'
import { type BuiltTracker, buildTracker, TRACKER_GZIP_BUDGET_BYTES } from './build'
import { TRACKER_CACHE_CONTROL, trackerResponse } from './serve'

export type { BuiltTracker } from './build'
export { buildTracker, TrackerBuildError } from './build'

/**
 * For apps created without a prebuilt script (tests, tools): built on the first request, once per
 * app. A failed build is not remembered, so the next request tries again.
 */
function lazyTracker(): () => Promise<BuiltTracker> {
  let pending: Promise<BuiltTracker> | undefined
  return () => {
    pending ??= buildTracker().catch((error) => {
      pending = undefined
      throw error
    })
    return pending
  }
}

const TrackerHeaders = t.Object({
  'if-none-match': t.Optional(t.String({ description: 'ETag of a cached copy: 304 when it is current' })),
  'accept-encoding': t.Optional(t.String({ description: 'gzip is served when accepted' })),
})

const SCRIPT_HEADERS = {
  ETag: {
    required: true,
    schema: { type: 'string' },
    description: 'validator for If-None-Match (`-gzip` for gzip)',
  },
  'Cache-Control': {
    required: true,
    schema: { type: 'string', examples: [TRACKER_CACHE_CONTROL] },
    description: 'cacheable by browsers and CDNs for an hour',
  },
  'Access-Control-Allow-Origin': {
    required: true,
    schema: { type: 'string', examples: ['*'] },
    description: 'any website may load the script',
  },
}

/**
 * `GET /api/webhook/tracker.js`: the website script, public and cacheable. Served from memory; no
 * auth and nothing secret in it (the webhook URL comes from the page's own script tag).
 */
export function trackerModule(tracker?: BuiltTracker) {
  const load = tracker ? () => tracker : lazyTracker()
  return new Elysia({ name: 'tracker' }).get(
    TRACKER_PATH,
    async ({ headers }) =>
      trackerResponse(await load(), {
        ifNoneMatch: headers['if-none-match'],
        acceptEncoding: headers['accept-encoding'],
      }),
    {
      headers: TrackerHeaders,
      response: {
        200: t.String({ description: 'The script (application/javascript)' }),
        304: t.Void({ description: 'Not modified: the cached copy is current' }),
      },
      detail: {
        operationId: 'getTrackerScript',
        tags: ['Tracker'],
        summary: 'The website tracking script',
        description: [
          'Public, no authentication. Embed with',
          '`<script async src="{base}/api/webhook/tracker.js" data-webhook-url="{webhook_url}"></script>`.',
          'It keeps first- and last-touch attribution (utm_*, gclid, fbclid, msclkid, referrer, landing page) in',
          'localStorage (nothing with Do Not Track or Global Privacy Control), posts forms marked',
          '`data-lead-capture` (every form with an e-mail or tel input with `data-forms="auto"`) to the webhook',
          "URL as JSON with `_elapsed_ms`, `page_url` and `attribution`, and never blocks the page's own submit.",
          'Never sent: passwords (also after a "show password" toggle), card data by name, `cc-*` autocomplete or',
          'Luhn-valid value, nonces and builder plumbing, unmarked hidden inputs; log-in and sign-up forms are not',
          'captured. URLs keep only `utm_*`, `gclid`, `fbclid`, `msclkid` of their query and lose the fragment',
          '(no query at all under DNT/GPC). `window.LeadCapture.submit(data)` sends a lead by hand.',
          '`data-debug` logs to the console. ETag / If-None-Match (304), `Cache-Control: public, max-age=3600`,',
          `CORS \`*\`, gzip when accepted; at most ${TRACKER_GZIP_BUDGET_BYTES} bytes gzipped.`,
        ].join(' '),
        // Elysia writes every string response as text/plain: the real media type and headers.
        'x-responses': {
          200: {
            description: 'The script',
            headers: SCRIPT_HEADERS,
            content: { 'application/javascript': { schema: { type: 'string' } } },
          },
          304: { description: 'Not modified', headers: SCRIPT_HEADERS },
        } as never,
      },
    },
  )
}
