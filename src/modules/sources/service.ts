import type { Config } from '../../config'
import type { AppContext } from '../../context'
import { creationPosition, decodeCursor, pageOf } from '../../lib/cursor'
import { errors } from '../../lib/errors'
import { isUuid, newId } from '../../lib/ids'
import { requireName } from '../../lib/names'
import { DEFAULT_PAGE_SIZE } from '../../lib/schemas'
import { digestSecret, generateSecret } from '../../lib/secrets'
import type {
  CreateSourceBody,
  SourceList,
  SourceListQuery,
  SourceRecord,
  SourceWithKey,
  UpdateSourceBody,
} from './model'
import { type NewSourceRow, type SourceChanges, type SourceRow, SourcesRepository } from './repository'
import type { SourceCache } from './source-cache'
import { validateSourceSettings } from './validation'

/** A freshly issued source key: the plain value leaves the service once, inside the response. */
export interface IssuedSourceKey {
  apiKey: string
  digest: string
  /** The last 4 characters, kept to recognise the key later. */
  hint: string
  webhookUrl: string
}

/** The one place source keys are made: creation, regeneration and the CLI all come through here. */
export function issueSourceKey(config: Pick<Config, 'publicBaseUrl'>): IssuedSourceKey {
  const apiKey = generateSecret('source_key')
  return {
    apiKey,
    digest: digestSecret(apiKey),
    hint: apiKey.slice(-4),
    webhookUrl: webhookUrlOf(config, apiKey),
  }
}

export function webhookUrlOf(config: Pick<Config, 'publicBaseUrl'>, apiKey: string): string {
  return `${config.publicBaseUrl}/api/webhook/lead/${apiKey}`
}

export function toSourceRecord(row: SourceRow): SourceRecord {
  return {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    key_hint: row.keyHint,
    ip_allowlist: row.ipAllowlist,
    domain_allowlist: row.domainAllowlist,
    field_mapping: row.fieldMapping,
    default_country: row.defaultCountry,
    spam_filter: row.spamFilter,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    key_rotated_at: row.keyRotatedAt?.toISOString() ?? null,
    last_request_at: row.lastRequestAt?.toISOString() ?? null,
  }
}

function withKey(row: SourceRow, key: IssuedSourceKey): SourceWithKey {
  return { ...toSourceRecord(row), api_key: key.apiKey, webhook_url: key.webhookUrl }
}

export class SourcesService {
  private readonly repository: SourcesRepository

  constructor(
    private readonly ctx: AppContext,
    private readonly cache: SourceCache,
  ) {
    this.repository = new SourcesRepository(ctx)
  }

  async list(organizationId: string, query: SourceListQuery): Promise<SourceList> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE
    const beforeId = query.cursor ? decodeCursor(query.cursor).id : undefined
    const rows = await this.repository.list(organizationId, { limit, beforeId, enabled: query.enabled })
    const page = pageOf(rows, limit, creationPosition)
    return { data: page.rows.map(toSourceRecord), next_cursor: page.nextCursor }
  }

  async get(organizationId: string, id: string): Promise<SourceRecord> {
    return toSourceRecord(await this.require(organizationId, id))
  }

  async create(organizationId: string, body: CreateSourceBody): Promise<SourceWithKey> {
    const [created] = await this.createMany(organizationId, [body])
    return created!
  }

  /**
   * Validates every spec first, then inserts in multi-row batches: bulk provisioning (the CLI)
   * and a single POST share the code path and the key issuing.
   */
  async createMany(organizationId: string, bodies: CreateSourceBody[]): Promise<SourceWithKey[]> {
    const now = new Date(this.ctx.clock.now())
    const keys: IssuedSourceKey[] = []
    const rows: NewSourceRow[] = bodies.map((body) => {
      const settings = validateSourceSettings(body)
      const key = issueSourceKey(this.ctx.config)
      keys.push(key)
      return {
        id: newId(),
        organizationId,
        name: requireName(body.name, '/name'),
        enabled: body.enabled ?? true,
        keyDigest: key.digest,
        keyHint: key.hint,
        ipAllowlist: settings.ipAllowlist ?? [],
        domainAllowlist: settings.domainAllowlist ?? [],
        fieldMapping: settings.fieldMapping ?? {},
        defaultCountry: settings.defaultCountry ?? null,
        spamFilter: body.spam_filter ?? true,
        createdAt: now,
        updatedAt: now,
      }
    })
    const inserted = await this.repository.insertMany(rows)
    // RETURNING order is not promised across a multi-row insert: pair rows and keys by id.
    const keyById = new Map(rows.map((row, index) => [row.id!, keys[index]!]))
    const byId = new Map(inserted.map((row) => [row.id, row]))
    return rows.map((row) => withKey(byId.get(row.id!)!, keyById.get(row.id!)!))
  }

  async update(organizationId: string, id: string, body: UpdateSourceBody): Promise<SourceRecord> {
    if (!isUuid(id)) throw notFound()
    const settings = validateSourceSettings(body)
    const changes: SourceChanges = { ...settings }
    if (body.name !== undefined) changes.name = requireName(body.name, '/name')
    if (body.enabled !== undefined) changes.enabled = body.enabled
    if (body.spam_filter !== undefined) changes.spamFilter = body.spam_filter
    if (Object.keys(changes).length === 0) return this.get(organizationId, id)
    changes.updatedAt = new Date(this.ctx.clock.now())
    const row = await this.repository.update(organizationId, id, changes)
    if (!row) throw notFound()
    await this.announce(row.id)
    return toSourceRecord(row)
  }

  async remove(organizationId: string, id: string): Promise<void> {
    if (!isUuid(id) || !(await this.repository.delete(organizationId, id))) throw notFound()
    await this.announce(id)
  }

  /**
   * A new key at once. With a grace window the old key keeps resolving until it ends (checked
   * against the context clock by the source cache); without one it stops immediately, on every
   * replica through the change announcement.
   */
  async regenerateKey(organizationId: string, id: string, graceSeconds = 0): Promise<SourceWithKey> {
    if (!isUuid(id)) throw notFound()
    const now = this.ctx.clock.now()
    const key = issueSourceKey(this.ctx.config)
    const row = await this.repository.rotateKey(organizationId, id, {
      digest: key.digest,
      hint: key.hint,
      now: new Date(now),
      previousKeyExpiresAt: graceSeconds > 0 ? new Date(now + graceSeconds * 1000) : null,
    })
    if (!row) throw notFound()
    await this.announce(row.id)
    return withKey(row, key)
  }

  private async require(organizationId: string, id: string): Promise<SourceRow> {
    const row = isUuid(id) ? await this.repository.findById(organizationId, id) : null
    if (!row) throw notFound()
    return row
  }

  /**
   * The change is committed by now; if the NOTIFY itself fails the caller still gets the committed
   * state: this replica has evicted already, other replicas drop the entry when their listener
   * reconnects or the entry reaches its maximum age.
   */
  private async announce(sourceId: string): Promise<void> {
    try {
      await this.cache.announceChange(sourceId)
    } catch (error) {
      this.ctx.logger.error('source change committed but not announced to other replicas', {
        source_id: sourceId,
        error,
      })
    }
  }
}

function notFound() {
  return errors.notFound('source')
}
