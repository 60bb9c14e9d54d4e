import { Elysia, t } from 'elysia'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import {
  CreateSourceBody,
  RegenerateKeyBody,
  SourceIdParams,
  SourceList,
  SourceListQuery,
  SourceRecord,
  SourceWithKey,
  UpdateSourceBody,
} from './model'
import type { SourcesService } from './service'

// DESIGN §4: the spec's management endpoints need the permission and the plan feature.
const auth = { permission: 'settings.integrations', feature: 'integrations' } as const
// Finding a source and ending or rotating its key stay open after a downgrade to `free`: the spec
// says a leaked webhook URL must be regenerated (§5), and inbound leads keep flowing on every plan,
// so a plan gate here would leave a leaked key alive (docs/security.md).
const endKeys = { permission: 'settings.integrations' } as const
/** The requirements of the source routes, for the dashboard's pages (they allow the same). */
export const SOURCE_ACCESS = { read: endKeys, manage: auth, endKeys } as const
const endKeysNote =
  'Needs the permission `settings.integrations`, on every plan (a key must stay revocable after a downgrade). A source of another organization is a 404; an id that is not a UUID is 400 `validation_failed` (docs/api.md).'

const tags = ['Sources']
const accessNote =
  'Needs the permission `settings.integrations` and a plan with the `integrations` feature. A source of another organization is a 404; an id that is not a UUID is 400 `validation_failed` (docs/api.md).'

/** Webhook sources: the controller. Every change is announced so all replicas see it within 1 s. */
export function sourcesModule(service: SourcesService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'sources', prefix: '/api/webhook/sources' })
    .use(authPlugin)
    .get('', ({ principal, query }) => service.list(principal.organizationId, query), {
      auth: endKeys,
      query: SourceListQuery,
      response: { 200: SourceList, ...managementErrors },
      detail: {
        operationId: 'listSources',
        tags,
        summary: 'List sources',
        description:
          'Newest first, `?limit=` (default 50, max 200) and `?cursor=`; `?enabled=true|false` filters. Keys are never listed, only their last 4 characters (`key_hint`). ' +
          endKeysNote,
      },
    })
    .post(
      '',
      async ({ principal, body, status }) =>
        status(201, await service.create(principal.organizationId, body)),
      {
        auth,
        body: CreateSourceBody,
        transform: rejectUnknownFields(CreateSourceBody),
        response: { 201: SourceWithKey, ...managementErrors },
        detail: {
          operationId: 'createSource',
          tags,
          summary: 'Create a source',
          description:
            'Creates a source with a new key. The response carries `api_key` and `webhook_url` in plain text: this is the only time they are shown (only a SHA-256 digest is stored). Allow list entries and mapping targets are checked one by one; each bad entry is named in `details` of the 400. ' +
            accessNote,
        },
      },
    )
    .get('/:id', ({ principal, params }) => service.get(principal.organizationId, params.id), {
      auth: endKeys,
      params: SourceIdParams,
      response: { 200: SourceRecord, ...managementErrors, 404: ErrorBody },
      detail: {
        operationId: 'getSource',
        tags,
        summary: 'Get a source',
        description: 'The source without its key. ' + endKeysNote,
      },
    })
    .patch(
      '/:id',
      ({ principal, params, body }) => service.update(principal.organizationId, params.id, body),
      {
        auth,
        params: SourceIdParams,
        body: UpdateSourceBody,
        transform: rejectUnknownFields(UpdateSourceBody),
        response: { 200: SourceRecord, ...managementErrors, 404: ErrorBody },
        detail: {
          operationId: 'updateSource',
          tags,
          summary: 'Update a source (rename, enable/disable, allow lists, mapping, country, spam filter)',
          description:
            'Only the fields sent change; lists and the mapping are replaced whole. `enabled: false` makes the webhook URL answer 404 on every replica within 1 s; `enabled: true` brings it back with the same key. ' +
            accessNote,
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
        auth: endKeys,
        params: SourceIdParams,
        response: { 204: t.Void({ description: 'Deleted; no body' }), ...managementErrors, 404: ErrorBody },
        detail: {
          operationId: 'deleteSource',
          tags,
          summary: 'Delete a source',
          description:
            'Deletes the source and its delivery logs; its webhook URL stops at once on every replica. Leads it brought in are kept, with `source_id: null`. ' +
            endKeysNote,
        },
      },
    )
    .post(
      '/:id/regenerate-key',
      ({ principal, params, body }) =>
        service.regenerateKey(principal.organizationId, params.id, body?.grace_seconds ?? 0),
      {
        auth: endKeys,
        params: SourceIdParams,
        body: RegenerateKeyBody,
        transform: rejectUnknownFields(RegenerateKeyBody),
        response: { 200: SourceWithKey, ...managementErrors, 404: ErrorBody },
        detail: {
          operationId: 'regenerateSourceKey',
          // The body may be left out (no grace period); Elysia marks every declared body required.
          'x-optional-body': true,
          tags,
          summary: 'Regenerate the source key',
          description:
            'Issues a new key and webhook URL, shown in this response only. The old key stops at once on every replica, or keeps working for `grace_seconds` (0-86400) so forms can be switched over without losing leads. Limited to 10 per minute per user. ' +
            endKeysNote,
        },
      },
    )
}
