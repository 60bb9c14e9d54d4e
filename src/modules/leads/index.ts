import { Elysia, t } from 'elysia'
import type { AppContext } from '../../context'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import { authPlugin } from '../../plugins/auth'
import { Lead, LeadIdParams, LeadList, LeadListQuery, UpdateLeadBody } from './model'
import { leadsService } from './service'

const tags = ['Leads']
// Leads are not the integrations feature (DESIGN §10): every plan can read and edit its leads.
const accessNote =
  'A lead of another organization is a 404; an id that is not a UUID is 400 `validation_failed` (docs/api.md).'

/** Stored leads (`/api/v2`, a surface the spec does not list): the controller. */
export function leadsModule(ctx: AppContext) {
  const service = leadsService(ctx)
  return new Elysia({ name: 'leads', prefix: '/api/v2/leads' })
    .use(authPlugin(ctx))
    .get('', ({ principal, query }) => service.list(principal.organizationId, query), {
      auth: { permission: 'leads.read' },
      query: LeadListQuery,
      response: { 200: LeadList, ...managementErrors },
      detail: {
        operationId: 'listLeads',
        tags,
        summary: 'List leads',
        description:
          'Newest first, `?limit=` (default 50, max 200) and `?cursor=`. Filters: `source_id`, `q` (e-mail or phone), `created_after`; they combine. Needs `leads.read`.',
      },
    })
    .get('/:id', ({ principal, params }) => service.get(principal.organizationId, params.id), {
      auth: { permission: 'leads.read' },
      params: LeadIdParams,
      response: { 200: Lead, ...managementErrors, 404: ErrorBody },
      detail: {
        operationId: 'getLead',
        tags,
        summary: 'Get a lead',
        description: 'Needs `leads.read`. ' + accessNote,
      },
    })
    .patch(
      '/:id',
      ({ principal, params, body }) => service.update(principal.organizationId, params.id, body),
      {
        auth: { permission: 'leads.write' },
        params: LeadIdParams,
        body: UpdateLeadBody,
        transform: rejectUnknownFields(UpdateLeadBody),
        response: { 200: Lead, ...managementErrors, 404: ErrorBody, 409: ErrorBody },
        detail: {
          operationId: 'updateLead',
          tags,
          summary: 'Edit a lead',
          description:
            "Editable: `first_name`, `last_name`, `email`, `phone_raw`, `status`, `custom_fields` (replaced whole). A new e-mail or phone is validated and its dedup key recomputed (e-mail trimmed and lower-cased; phone in E.164 with the source's default country). An e-mail another lead of the organization already has is a 409 `duplicate_lead`. Needs `leads.write`. " +
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
        auth: { permission: 'leads.delete' },
        params: LeadIdParams,
        response: { 204: t.Void({ description: 'Deleted; no body' }), ...managementErrors, 404: ErrorBody },
        detail: {
          operationId: 'deleteLead',
          tags,
          summary: 'Delete a lead',
          description:
            'Deletes the lead; delivery-log entries keep its id for the record. Needs `leads.delete`. ' +
            accessNote,
        },
      },
    )
}
