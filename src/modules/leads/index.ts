import { Elysia, t } from 'elysia'
import type { AppContext } from '../../context'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import {
  LEAD_CSV_COLUMNS,
  Lead,
  LeadExportQuery,
  LeadIdParams,
  LeadList,
  LeadListQuery,
  UpdateLeadBody,
} from './model'
import type { LeadsService } from './service'

const tags = ['Leads']
/** The requirements of the leads routes, for the dashboard's pages. */
export const LEAD_ACCESS = {
  read: { permission: 'leads.read' },
  write: { permission: 'leads.write' },
  delete: { permission: 'leads.delete' },
} as const
// Leads are not the integrations feature (DESIGN §10): every plan can read and edit its leads.
const accessNote =
  'A lead of another organization is a 404; an id that is not a UUID is 400 `validation_failed` (docs/api.md).'

/** `leads-20260101-1000.csv`: the UTC minute of the export. */
export function csvFileName(now: number): string {
  const stamp = new Date(now).toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-')
  return `leads-${stamp}.csv`
}

/** Stored leads (`/api/v2`, a surface the spec does not list): the controller. */
export function leadsModule(ctx: AppContext, service: LeadsService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'leads', prefix: '/api/v2/leads' })
    .use(authPlugin)
    .get('', ({ principal, query }) => service.list(principal.organizationId, query), {
      auth: LEAD_ACCESS.read,
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
    .get(
      '/export.csv',
      ({ principal, query, set }) =>
        new Response(service.exportCsv(principal.organizationId, query), {
          headers: {
            ...(set.headers as Record<string, string>),
            'content-type': 'text/csv; charset=utf-8',
            'content-disposition': `attachment; filename="${csvFileName(ctx.clock.now())}"`,
            'cache-control': 'no-store',
          },
        }),
      {
        auth: LEAD_ACCESS.read,
        query: LeadExportQuery,
        response: {
          // Published as text/csv through `x-responses` below (Elysia would say text/plain).
          200: t.String({
            contentMediaType: 'text/csv',
            description: `CSV (RFC 4180, UTF-8, CRLF), one header row: ${LEAD_CSV_COLUMNS.join(', ')}`,
          }),
          ...managementErrors,
        },
        detail: {
          operationId: 'exportLeadsCsv',
          tags,
          summary: 'Export leads as CSV',
          description: [
            'Every lead the filters match, newest first, streamed: no row limit, and the service holds one',
            'page of rows at a time whatever the total. Filters as the list: `source_id`, `q`, `created_after`.',
            '`custom_fields` and `attribution` are JSON text. A cell starting with `=`, `+`, `-`, `@`, a tab or',
            "a carriage return is prefixed with `'` so a spreadsheet never reads it as a formula (an E.164 phone",
            "reads `'+4420…`); cells with a comma, quote or line break are quoted. Leads created while the export",
            'runs are left out. Needs `leads.read`; a browser signed in to the dashboard downloads it from',
            '`/app/leads/export.csv` with its session cookie (the API never accepts the cookie).',
          ].join(' '),
          // Elysia files every string response under text/plain: the real media type and headers.
          'x-responses': {
            200: {
              description: 'The leads as CSV',
              headers: {
                'Content-Disposition': {
                  required: true,
                  schema: { type: 'string', examples: ['attachment; filename="leads-2026-11-23.csv"'] },
                  description: 'a download with a dated file name',
                },
                'Cache-Control': { required: true, schema: { type: 'string', examples: ['no-store'] } },
              },
              content: { 'text/csv': { schema: { type: 'string' } } },
            },
          } as never,
        },
      },
    )
    .get('/:id', ({ principal, params }) => service.get(principal.organizationId, params.id), {
      auth: LEAD_ACCESS.read,
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
        auth: LEAD_ACCESS.write,
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
        auth: LEAD_ACCESS.delete,
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
