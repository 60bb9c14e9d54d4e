import type { AppContext } from '../../context'
import { isUniqueViolation } from '../../db/unique-violation'
// The dedup keys must be computed exactly as the inbound path computes them, or an edited lead
// would stop matching (or wrongly match) the next webhook submission.
import { CUSTOM_FIELD_NAME_PATTERN, normalizeEmail, normalizePhone } from '../../lib/contact'
import { csvCell, csvRow } from '../../lib/csv'
import { creationPosition, decodeCursor, pageOf } from '../../lib/cursor'
import { AppError, describeError, errors, type ValidationDetail } from '../../lib/errors'
import { isUuid } from '../../lib/ids'
import { DEFAULT_PAGE_SIZE } from '../../lib/schemas'
import {
  CUSTOM_FIELDS_MAX_BYTES,
  CUSTOM_FIELDS_MAX_COUNT,
  LEAD_CSV_COLUMNS,
  type Lead,
  type LeadExportQuery,
  type LeadList,
  type LeadListQuery,
  type UpdateLeadBody,
} from './model'
import {
  type LeadChanges,
  type LeadExportRow,
  type LeadFilters,
  type LeadRow,
  LeadsRepository,
} from './repository'

const EMAIL_UNIQUE_INDEX = 'leads_org_email_unique'
/**
 * Rows per query of the CSV export: one keyset page in memory at a time, whatever the total.
 * 500: half the rows alive at once of the earlier 1,000 with the same peak on the bench; 250 made
 * twice the round trips and ran slower on a loaded machine (docs/benchmarks.md, "CSV export").
 */
export const CSV_EXPORT_BATCH_ROWS = 500
/** Pages of the CSV export between two full collections it asks for: 20,000 rows. */
const EXPORT_PAGES_PER_COLLECTION = 40

export function toLead(row: LeadRow): Lead {
  return {
    lead_id: row.id,
    source_id: row.sourceId,
    first_name: row.firstName,
    last_name: row.lastName,
    email: row.email,
    phone_raw: row.phoneRaw,
    phone_e164: row.phoneE164,
    status: row.status,
    custom_fields: row.customFields,
    attribution: row.attribution,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  }
}

export class LeadsService {
  constructor(
    private readonly ctx: AppContext,
    private readonly repository: LeadsRepository = new LeadsRepository(ctx),
  ) {}

  async list(organizationId: string, query: LeadListQuery): Promise<LeadList> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE
    const filters = filtersOf(query, limit)
    if (query.cursor) filters.beforeId = decodeCursor(query.cursor).id
    const page = pageOf(await this.repository.list(organizationId, filters), limit, creationPosition)
    return { data: page.rows.map(toLead), next_cursor: page.nextCursor }
  }

  /**
   * Every lead the filters match, newest first, as CSV. A pull stream: the next keyset page of
   * CSV_EXPORT_BATCH_ROWS is queried only when the consumer has taken the previous chunk (one
   * page queued at most), so a slow client slows the queries down instead of filling a buffer.
   * Each page goes from the export's own columns straight to one CSV string and one chunk (no
   * full row, no Lead object, no array per row): what an export costs in memory is the garbage it
   * makes per row, collected as it goes, so fewer and smaller objects keep the peak flat whatever
   * the number of rows (docs/benchmarks.md, "CSV export"). Leads created after the export starts
   * are not included (ids are UUIDv7: they sort after the first page).
   */
  exportCsv(organizationId: string, query: LeadExportQuery): ReadableStream<Uint8Array> {
    const filters = filtersOf(query, CSV_EXPORT_BATCH_ROWS)
    const encoder = new TextEncoder()
    const { logger } = this.ctx
    const repository = this.repository
    let finished = false
    let pages = 0
    return new ReadableStream<Uint8Array>(
      {
        start(controller) {
          controller.enqueue(encoder.encode(csvRow(LEAD_CSV_COLUMNS)))
        },
        async pull(controller) {
          try {
            const rows = await repository.exportPage(organizationId, filters)
            if (finished) return
            const count = Math.min(rows.length, CSV_EXPORT_BATCH_ROWS)
            if (count > 0) {
              let text = ''
              for (let index = 0; index < count; index++) text += csvLineOf(rows[index]!)
              controller.enqueue(encoder.encode(text))
              filters.beforeId = rows[count - 1]!.id
              // A fast reader takes pages faster than the collector's own pace frees them: left to
              // itself the peak grew with the rows, and an asynchronous request did not help
              // (docs/benchmarks.md, "CSV export"). A full collection every
              // EXPORT_PAGES_PER_COLLECTION pages bounds the garbage an export holds, for a pause of
              // a few milliseconds per 20,000 rows.
              if (++pages % EXPORT_PAGES_PER_COLLECTION === 0) Bun.gc(true)
            }
            if (rows.length <= CSV_EXPORT_BATCH_ROWS) {
              finished = true
              controller.close()
            }
          } catch (error) {
            // The status line is already sent: the client sees a cut-off download, never a
            // truncated file that looks complete (no closing chunk is written).
            logger.error('lead CSV export failed', { error: describeError(error) })
            finished = true
            controller.error(error)
          }
        },
        cancel() {
          finished = true
        },
      },
      { highWaterMark: 1 },
    )
  }

  async get(organizationId: string, id: string): Promise<Lead> {
    const row = isUuid(id) ? await this.repository.findById(organizationId, id) : null
    if (!row) throw notFound()
    return toLead(row)
  }

  /**
   * Applies the fields sent, recomputing the dedup keys when the e-mail or phone change. The unique
   * index on the normalised e-mail decides collisions (no check-then-write race): 409.
   */
  async update(organizationId: string, id: string, body: UpdateLeadBody): Promise<Lead> {
    const found = isUuid(id) ? await this.repository.findForUpdate(organizationId, id) : null
    if (!found) throw notFound()
    const { lead, defaultCountry } = found
    const details: ValidationDetail[] = []
    const changes: LeadChanges = {}

    if (body.first_name !== undefined) changes.firstName = textOrNull(body.first_name)
    if (body.last_name !== undefined) changes.lastName = textOrNull(body.last_name)
    if (body.status !== undefined) changes.status = textOrNull(body.status)
    if (body.email !== undefined) {
      const email = textOrNull(body.email)
      const normalized = normalizeEmail(email)
      if (email !== null && normalized === null) {
        details.push({ path: '/email', message: `"${email}" is not a valid e-mail address` })
      }
      changes.email = email
      changes.emailNormalized = normalized
    }
    if (body.phone_raw !== undefined) {
      const phone = textOrNull(body.phone_raw)
      const e164 = normalizePhone(phone, defaultCountry)
      if (phone !== null && e164 === null) {
        details.push({
          path: '/phone_raw',
          message: defaultCountry
            ? `"${phone}" is not a valid phone number (read with the default country ${defaultCountry})`
            : `"${phone}" is not a valid phone number; write it with its +country prefix`,
        })
      }
      changes.phoneRaw = phone
      changes.phoneE164 = e164
    }
    if (body.custom_fields !== undefined) details.push(...checkCustomFields(body.custom_fields))
    if (details.length === 0 && (body.email !== undefined || body.phone_raw !== undefined)) {
      const emailAfter = 'emailNormalized' in changes ? changes.emailNormalized : lead.emailNormalized
      const phoneAfter = 'phoneE164' in changes ? changes.phoneE164 : lead.phoneE164
      if (!emailAfter && !phoneAfter) {
        details.push({ path: '/', message: 'a lead keeps at least one of a valid e-mail or phone number' })
      }
    }
    if (details.length > 0) throw errors.validation('the lead fields are not valid', details)
    if (body.custom_fields !== undefined) changes.customFields = body.custom_fields

    if (Object.keys(changes).length === 0) return toLead(lead)
    changes.updatedAt = new Date(this.ctx.clock.now())
    let row: LeadRow | null
    try {
      row = await this.repository.update(organizationId, id, changes)
    } catch (error) {
      if (isUniqueViolation(error, EMAIL_UNIQUE_INDEX)) {
        throw new AppError(
          'duplicate_lead',
          'another lead of this organization already has this e-mail address',
        )
      }
      throw error
    }
    if (!row) throw notFound()
    return toLead(row)
  }

  async remove(organizationId: string, id: string): Promise<void> {
    if (!isUuid(id) || !(await this.repository.delete(organizationId, id))) throw notFound()
  }
}

/** The repository filters of the list query; shared by the list and the CSV export. */
function filtersOf(query: LeadExportQuery, limit: number): LeadFilters {
  const filters: LeadFilters = { limit }
  if (query.source_id) filters.sourceId = query.source_id.toLowerCase()
  if (query.created_after) filters.createdAfter = new Date(query.created_after)
  const q = query.q?.trim()
  if (q) {
    const digits = q.replace(/\D/g, '')
    filters.search = {
      substring: q,
      emailNormalized: q.toLowerCase(),
      phoneE164: normalizePhone(q, null),
      // Only for text that looks like a phone: "a1b2" should not turn into a digit search.
      digits: digits.length >= 4 && /^[\d\s()+.-]+$/.test(q) ? digits : null,
    }
  }
  return filters
}

/** Each CSV column from an export row, as the JSON list shows it (objects as JSON text). */
const CSV_CELLS: Record<(typeof LEAD_CSV_COLUMNS)[number], (row: LeadExportRow) => string | null> = {
  lead_id: (row) => row.id,
  source_id: (row) => row.sourceId,
  created_at: (row) => row.createdAt.toISOString(),
  updated_at: (row) => row.updatedAt.toISOString(),
  first_name: (row) => row.firstName,
  last_name: (row) => row.lastName,
  email: (row) => row.email,
  phone_raw: (row) => row.phoneRaw,
  phone_e164: (row) => row.phoneE164,
  status: (row) => row.status,
  custom_fields: (row) => JSON.stringify(row.customFields),
  attribution: (row) => JSON.stringify(row.attribution),
}
const CSV_CELL_READERS = LEAD_CSV_COLUMNS.map((column) => CSV_CELLS[column])

/** One CSV line (csvRow's rules) without an array of cells per row. */
function csvLineOf(row: LeadExportRow): string {
  let line = ''
  for (let index = 0; index < CSV_CELL_READERS.length; index++) {
    if (index > 0) line += ','
    line += csvCell(CSV_CELL_READERS[index]!(row))
  }
  return `${line}\r\n`
}

function textOrNull(value: string | null): string | null {
  const trimmed = value?.trim()
  return trimmed ? trimmed : null
}

function checkCustomFields(fields: Record<string, unknown>): ValidationDetail[] {
  const details: ValidationDetail[] = []
  const names = Object.keys(fields)
  if (names.length > CUSTOM_FIELDS_MAX_COUNT) {
    details.push({
      path: '/custom_fields',
      message: `at most ${CUSTOM_FIELDS_MAX_COUNT} custom fields, got ${names.length}`,
    })
  }
  for (const name of names) {
    if (!CUSTOM_FIELD_NAME_PATTERN.test(name)) {
      details.push({
        path: `/custom_fields/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`,
        message: 'custom field names are 1-100 characters of A-Z a-z 0-9 _ . -',
      })
    }
  }
  if (Buffer.byteLength(JSON.stringify(fields)) > CUSTOM_FIELDS_MAX_BYTES) {
    details.push({ path: '/custom_fields', message: `at most ${CUSTOM_FIELDS_MAX_BYTES} bytes of JSON` })
  }
  return details
}

function notFound() {
  return errors.notFound('lead')
}
