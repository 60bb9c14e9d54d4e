import { Webhook } from 'standardwebhooks'

/** One request a receiver got, as it arrived. */
export interface ReceivedWebhook {
  headers: Record<string, string>
  body: string
  json: { type: string; timestamp: string; data: Record<string, unknown> }
  at: number
}

export type Reply = (request: ReceivedWebhook) => Response | Promise<Response>

/**
 * A real HTTP receiver on loopback (tests set OUTBOUND_ALLOW_PRIVATE_NETWORKS so the worker may
 * reach it). It records every request, answers with `reply` (200 by default) and counts how many
 * requests it holds at once.
 */
export function startReceiver(reply: Reply = () => new Response('ok')) {
  const received: ReceivedWebhook[] = []
  let current = reply
  let inFlight = 0
  let maxInFlight = 0
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = await request.text()
      const entry: ReceivedWebhook = {
        headers: Object.fromEntries(request.headers.entries()),
        body,
        json: JSON.parse(body),
        at: Date.now(),
      }
      received.push(entry)
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      try {
        return await current(entry)
      } finally {
        inFlight--
      }
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    port: server.port!,
    received,
    get maxInFlight() {
      return maxInFlight
    },
    reply(next: Reply) {
      current = next
    },
    stop: () => server.stop(true),
  }
}

/**
 * Whether `secret` signed this request, checked with the standardwebhooks library. `verify()`
 * also checks the timestamp against the real clock, so tests on a fake clock compare the library's
 * own signature for the request's timestamp with each one sent.
 */
export function signedWith(secret: string, request: ReceivedWebhook): boolean {
  const timestamp = new Date(Number(request.headers['webhook-timestamp']) * 1000)
  const expected = new Webhook(secret).sign(request.headers['webhook-id']!, timestamp, request.body)
  return (request.headers['webhook-signature'] ?? '').split(' ').includes(expected)
}
