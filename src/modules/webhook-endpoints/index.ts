import { Elysia } from 'elysia'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import {
  CreateEndpointBody,
  EndpointDeleted,
  EndpointIdParams,
  EndpointList,
  EndpointListQuery,
  EndpointRecord,
  EndpointWithSecret,
  MessageList,
  MessageListQuery,
  MessageParams,
  QueuedMessage,
  RecoverBody,
  RecoverResult,
  UpdateEndpointBody,
} from './model'
import type { WebhookEndpointsService } from './service'

// DESIGN §4: integrations are management endpoints: the permission and the plan feature.
const auth = { permission: 'settings.integrations', feature: 'integrations' } as const
const tags = ['Webhook endpoints']
const accessNote =
  'Needs the permission `settings.integrations` and a plan with the `integrations` feature. An endpoint of another organization, or an id that is not a UUID, is a 404.'
const withNotFound = { ...managementErrors, 404: ErrorBody }

/** Outbound webhook endpoints and their messages: the controller. Delivery is the worker's (worker.ts). */
export function webhookEndpointsModule(service: WebhookEndpointsService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'webhook-endpoints', prefix: '/api/v2/webhook-endpoints' })
    .use(authPlugin)
    .get('', ({ principal, query }) => service.list(principal.organizationId, query), {
      auth,
      query: EndpointListQuery,
      response: { 200: EndpointList, ...managementErrors },
      detail: {
        tags,
        operationId: 'listWebhookEndpoints',
        summary: 'List webhook endpoints',
        description: `Newest first, \`?limit=\` (default 50, max 200) and \`?cursor=\`, with delivery counts. Secrets are never listed. ${accessNote}`,
      },
    })
    .post(
      '',
      async ({ principal, body, status }) =>
        status(201, await service.create(principal.organizationId, body)),
      {
        auth,
        body: CreateEndpointBody,
        transform: rejectUnknownFields(CreateEndpointBody),
        response: { 201: EndpointWithSecret, ...managementErrors, 409: ErrorBody },
        detail: {
          tags,
          operationId: 'createWebhookEndpoint',
          summary: 'Create a webhook endpoint',
          description: `Creates an endpoint and its signing secret (\`whsec_…\`), shown in this response only (it is stored encrypted). The URL must be \`https\` and resolve to public addresses only (400 otherwise). At most 50 endpoints per organization (409 \`endpoint_limit_reached\`). ${accessNote}`,
        },
      },
    )
    .get('/:id', ({ principal, params }) => service.get(principal.organizationId, params.id), {
      auth,
      params: EndpointIdParams,
      response: { 200: EndpointRecord, ...withNotFound },
      detail: {
        tags,
        operationId: 'getWebhookEndpoint',
        summary: 'Get a webhook endpoint',
        description: `The endpoint with its delivery counts, without its secret. ${accessNote}`,
      },
    })
    .patch(
      '/:id',
      ({ principal, params, body }) => service.update(principal.organizationId, params.id, body),
      {
        auth,
        params: EndpointIdParams,
        body: UpdateEndpointBody,
        transform: rejectUnknownFields(UpdateEndpointBody),
        response: { 200: EndpointRecord, ...withNotFound },
        detail: {
          tags,
          operationId: 'updateWebhookEndpoint',
          summary: 'Update a webhook endpoint',
          description: `Only the fields sent change. A new URL is checked as at creation. \`enabled: false\` stops attempts (pending messages wait); \`enabled: true\` resumes them and clears \`disabled_reason\`. ${accessNote}`,
        },
      },
    )
    .delete(
      '/:id',
      async ({ principal, params, status }) => {
        await service.remove(principal.organizationId, params.id)
        return status(204, undefined)
      },
      {
        auth,
        params: EndpointIdParams,
        response: { 204: EndpointDeleted, ...withNotFound },
        detail: {
          tags,
          operationId: 'deleteWebhookEndpoint',
          summary: 'Delete a webhook endpoint',
          description: `Deletes the endpoint, its pending messages and its attempt history. ${accessNote}`,
        },
      },
    )
    .post(
      '/:id/rotate-secret',
      ({ principal, params }) => service.rotateSecret(principal.organizationId, params.id),
      {
        auth,
        params: EndpointIdParams,
        response: { 200: EndpointWithSecret, ...withNotFound },
        detail: {
          tags,
          operationId: 'rotateWebhookEndpointSecret',
          summary: 'Rotate the signing secret',
          description: `Issues a new secret, shown in this response only. For 24 hours (\`previous_secret_expires_at\`) every message carries two signatures in \`webhook-signature\`, one per secret, so receivers can switch over without rejecting anything. ${accessNote}`,
        },
      },
    )
    .post(
      '/:id/test',
      async ({ principal, params, status }) =>
        status(202, { message_id: await service.ping(principal.organizationId, params.id) }),
      {
        auth,
        params: EndpointIdParams,
        response: { 202: QueuedMessage, ...withNotFound, 409: ErrorBody },
        detail: {
          tags,
          operationId: 'pingWebhookEndpoint',
          summary: 'Send a ping event',
          description: `Queues a \`ping\` message for this endpoint (whatever its event filter) and sends it at once; follow it in \`GET …/{id}/messages\`. A disabled endpoint is a 409 \`endpoint_disabled\`. ${accessNote}`,
        },
      },
    )
    .get(
      '/:id/messages',
      ({ principal, params, query }) => service.listMessages(principal.organizationId, params.id, query),
      {
        auth,
        params: EndpointIdParams,
        query: MessageListQuery,
        response: { 200: MessageList, ...withNotFound },
        detail: {
          tags,
          operationId: 'listWebhookMessages',
          summary: "List an endpoint's messages",
          description: `Newest first, with their status, attempts (status, duration, the first 2 KB of each answer) and the next attempt time; \`?status=\` and \`?event_type=\` filter. A lead event is listed once the delivery worker has taken it (milliseconds after the lead; while the service is saturated, when the spell ends): it is stored with the lead either way. ${accessNote}`,
        },
      },
    )
    .post(
      '/:id/messages/:message_id/retry',
      async ({ principal, params, status }) => {
        await service.retryMessage(principal.organizationId, params.id, params.message_id)
        return status(202, { message_id: params.message_id.toLowerCase() })
      },
      {
        auth,
        params: MessageParams,
        response: { 202: QueuedMessage, ...withNotFound },
        detail: {
          tags,
          operationId: 'retryWebhookMessage',
          summary: 'Retry a message now',
          description: `Makes the message due at once, whatever its status (a succeeded one is sent again, with the same \`webhook-id\`). An unknown message is a 404. ${accessNote}`,
        },
      },
    )
    .post(
      '/:id/recover',
      async ({ principal, params, body }) => ({
        queued: await service.recover(principal.organizationId, params.id, body.since),
      }),
      {
        auth,
        params: EndpointIdParams,
        body: RecoverBody,
        transform: rejectUnknownFields(RecoverBody),
        response: { 200: RecoverResult, ...withNotFound },
        detail: {
          tags,
          operationId: 'recoverWebhookMessages',
          summary: 'Re-send failed messages',
          description: `Every \`failed\` message of the endpoint created at or after \`since\` is queued again now, each with its original \`webhook-id\`. ${accessNote}`,
        },
      },
    )
}
