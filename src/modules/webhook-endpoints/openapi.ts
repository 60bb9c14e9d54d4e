import { type EventType, WEBHOOK_EVENT_SCHEMAS } from './model'

/** camelCase operation ids for the receiver's side: `lead.created` → `leadCreatedEvent`. */
function operationIdOf(type: EventType): string {
  const words = type.split(/[._]/)
  return `${words.map((word, index) => (index === 0 ? word : word[0]!.toUpperCase() + word.slice(1))).join('')}Event`
}

const SIGNATURE_HEADERS = [
  {
    in: 'header',
    name: 'webhook-id',
    required: true,
    description: 'The message id (a UUID): the same on every attempt and replay; deduplicate on it',
    schema: { type: 'string', format: 'uuid' },
  },
  {
    in: 'header',
    name: 'webhook-timestamp',
    required: true,
    description: 'Seconds since the Unix epoch when this attempt was signed',
    schema: { type: 'string', examples: ['1795430400'] },
  },
  {
    in: 'header',
    name: 'webhook-signature',
    required: true,
    description:
      '`v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">` with the endpoint secret; during the 24 h after a rotation two signatures, space-separated (Standard Webhooks)',
    schema: { type: 'string' },
  },
]

/**
 * The OpenAPI 3.1 `webhooks` section: one entry per event type, the request our worker sends to a
 * registered endpoint (docs/webhooks.md). Built from the event schemas the worker's payloads are
 * typed by, so the document and the deliveries cannot differ.
 */
export function webhookEventsDocument(): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(WEBHOOK_EVENT_SCHEMAS).map(([type, schema]) => [
      type,
      {
        post: {
          operationId: operationIdOf(type as EventType),
          tags: ['Webhook endpoints'],
          summary: `The \`${type}\` event`,
          description: `${schema.description ?? ''} POSTed to every enabled endpoint subscribed to \`${type}\`. Any 2xx within the time limit (15 s) acknowledges it; anything else, a redirect included, is retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h.`,
          parameters: SIGNATURE_HEADERS,
          requestBody: { required: true, content: { 'application/json': { schema } } },
          responses: {
            '200': { description: 'Acknowledged (any 2xx does)' },
          },
          security: [],
        },
      },
    ]),
  )
}
