import { buildTracker, TRACKER_GZIP_BUDGET_BYTES } from './build'

/** `bun run tracker:size`: what a page downloads, against the budget; exit 1 when over it. */
const tracker = await buildTracker()
const verdict = tracker.gzipBytes <= TRACKER_GZIP_BUDGET_BYTES ? 'within' : 'OVER'
console.log(
  `tracker.js: ${tracker.rawBytes} bytes raw, ${tracker.gzipBytes} bytes gzipped ` +
    `(${verdict} the ${TRACKER_GZIP_BUDGET_BYTES}-byte budget)`,
)
if (verdict === 'OVER') process.exit(1)
