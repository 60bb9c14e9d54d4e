import Ajv2020 from 'ajv/dist/2020'
import addFormats from 'ajv-formats'
import { Webhook } from 'standardwebhooks'
import { webhookEventsDocument } from '../../src/modules/webhook-endpoints/openapi'

/** One request a receiver got, as it arrived. */
export interface ReceivedWebhook {
  headers: Record<string, string>
  body: string
  json: { type: string; timestamp: string; data: Record<string, unknown> }
  at: number
  /** The sender's port: one per connection, so requests on a kept-alive connection share it. */
  remotePort: number | undefined
}

export type Reply = (request: ReceivedWebhook) => Response | Promise<Response>

/**
 * Every body a receiver gets is checked against the OpenAPI document's `webhooks` entry of its
 * event type (the schema integrators generate their receivers from): a payload that drifts from
 * the contract fails the test when its receiver is stopped.
 */
const eventSchemas = (() => {
  const ajv = new Ajv2020({ strict: false, allErrors: true })
  addFormats(ajv)
  const validators = new Map<string, ReturnType<typeof ajv.compile>>()
  for (const [type, item] of Object.entries(webhookEventsDocument())) {
    const post = (item as { post: { requestBody: { content: Record<string, { schema: object }> } } }).post
    const schema = structuredClone(post.requestBody.content['application/json']!.schema)
    validators.set(type, ajv.compile(schema))
  }
  return validators
})()

function contractViolation(body: ReceivedWebhook['json']): string | null {
  const validate = eventSchemas.get(body?.type)
  if (!validate) return `event type ${JSON.stringify(body?.type)} is not in the document's webhooks`
  return validate(body) ? null : `${body.type}: ${JSON.stringify(validate.errors)}`
}

/**
 * A real HTTP receiver on loopback (tests set OUTBOUND_ALLOW_PRIVATE_NETWORKS so the worker may
 * reach it). It records every request, answers with `reply` (200 by default) and counts how many
 * requests it holds at once. `checkContract: false` only for tests that enqueue made-up payloads
 * on purpose (routing by type, say).
 */
export function startReceiver(
  reply: Reply = () => new Response('ok'),
  options: { checkContract?: boolean } = {},
) {
  const checkContract = options.checkContract ?? true
  const received: ReceivedWebhook[] = []
  const violations: string[] = []
  let current = reply
  let inFlight = 0
  let maxInFlight = 0
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request, server) {
      const body = await request.text()
      const entry: ReceivedWebhook = {
        headers: Object.fromEntries(request.headers.entries()),
        body,
        json: JSON.parse(body),
        at: Date.now(),
        remotePort: server.requestIP(request)?.port,
      }
      received.push(entry)
      const violation = checkContract ? contractViolation(entry.json) : null
      if (violation) violations.push(violation)
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
    stop: () => {
      server.stop(true)
      if (violations.length > 0) {
        throw new Error(`payloads outside the documented webhooks schemas:\n${violations.join('\n')}`)
      }
    },
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
