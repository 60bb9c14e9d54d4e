import { and, eq, gt, or, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { webhookSources } from '../../db/schema'
import { type Cidr, parseCidrList } from '../../lib/ip'

/**
 * What the inbound path needs of a source, with allow lists pre-parsed once. Read-only: the empty
 * lists and the empty mapping are one frozen value shared by every entry (below).
 */
export interface CachedSource {
  readonly id: string
  readonly organizationId: string
  readonly name: string
  readonly enabled: boolean
  readonly keyDigest: string
  /** The old key's digest while a regeneration grace window runs. */
  readonly previousKeyDigest: string | null
  readonly previousKeyExpiresAt: number | null
  /** The IP allow list, parsed (the text form is not kept: nothing on the inbound path reads it). */
  readonly ipRanges: readonly Cidr[]
  readonly domainAllowlist: readonly string[]
  readonly fieldMapping: Readonly<Record<string, string>>
  readonly defaultCountry: string | null
  readonly spamFilter: boolean
  readonly loadedAt: number
}

export const SOURCE_CHANNEL = 'lead_capture_source_changed'
// Belt and braces: even if a notification were lost, no entry lives longer than this. Changes
// normally arrive by NOTIFY within milliseconds; this only bounds the damage of a lost one.
const MAX_ENTRY_AGE_MS = 300_000
const MAX_ENTRIES = 50_000

// Most sources have no allow list and no field mapping. One frozen empty value shared by every such
// entry instead of three fresh ones per source: with 10,000 sources cached the cache took ~12 MB of
// live heap, a share that the collector multiplies into peak RSS (docs/operations.md, "Memory").
const NO_RANGES: readonly Cidr[] = Object.freeze([])
const NO_DOMAINS: readonly string[] = Object.freeze([])
const NO_MAPPING: Readonly<Record<string, string>> = Object.freeze({})

/**
 * Sources by key digest, kept in memory so the inbound path does no lookup query. Every change to
 * a source (update, disable, key regeneration, delete) is announced with NOTIFY on SOURCE_CHANNEL;
 * every replica LISTENs and drops the entry, so a change reaches all replicas well within 1 s.
 * When the listening connection drops and comes back the whole cache is dropped, since
 * notifications sent meanwhile are lost.
 */
export class SourceCache {
  private readonly byDigest = new Map<string, CachedSource>()
  // The digests a source is cached under: one (its key) but during a regeneration's grace window,
  // when the old key may be cached too. A lone digest is kept as the string itself, not a Set.
  private readonly digestsBySource = new Map<string, string | string[]>()
  private listening: Promise<void> | undefined
  // Bumped by every eviction: a lookup that overlapped one may have read the row before the change
  // committed, so its result is used once but not cached (it would outlive the change until expiry).
  private generation = 0
  private readonly lookup

  constructor(private readonly ctx: AppContext) {
    this.lookup = ctx.db
      .select()
      .from(webhookSources)
      .where(
        or(
          eq(webhookSources.keyDigest, sql.placeholder('digest')),
          and(
            eq(webhookSources.previousKeyDigest, sql.placeholder('digest')),
            // The context clock, not the database's now(): the cached entries below are checked
            // against the same clock, so a grace window ends at one instant for both paths.
            gt(webhookSources.previousKeyExpiresAt, sql`${sql.placeholder('now')}::timestamptz`),
          ),
        ),
      )
      .limit(1)
      .prepare('source_by_key_digest')
  }

  /** Starts listening for changes; idempotent. Called at start-up and before the first lookup. */
  listen(): Promise<void> {
    this.listening ??= this.ctx.database
      .listen(
        SOURCE_CHANNEL,
        (sourceId) => this.evict(sourceId),
        () => this.clear(),
      )
      .catch((error) => {
        this.listening = undefined
        throw error
      })
    return this.listening
  }

  async findByKeyDigest(digest: string): Promise<CachedSource | null> {
    await this.listen()
    const now = this.ctx.clock.now()
    const cached = this.byDigest.get(digest)
    if (cached !== undefined && now - cached.loadedAt < MAX_ENTRY_AGE_MS) {
      if (cached.keyDigest === digest) return cached
      if (cached.previousKeyExpiresAt !== null && cached.previousKeyExpiresAt > now) return cached
    }
    const generation = this.generation
    const [row] = await this.lookup.execute({ digest, now: new Date(now).toISOString() })
    if (!row) return null
    const ipRanges = parseCidrList(row.ipAllowlist)
    const source: CachedSource = {
      id: row.id,
      organizationId: row.organizationId,
      name: row.name,
      enabled: row.enabled,
      // The request's digest is the map key already: one string, not two equal ones.
      keyDigest: row.keyDigest === digest ? digest : row.keyDigest,
      previousKeyDigest: row.previousKeyDigest === digest ? digest : row.previousKeyDigest,
      previousKeyExpiresAt: row.previousKeyExpiresAt?.getTime() ?? null,
      ipRanges: ipRanges.length > 0 ? ipRanges : NO_RANGES,
      domainAllowlist:
        row.domainAllowlist.length > 0
          ? row.domainAllowlist.map((domain) => domain.toLowerCase())
          : NO_DOMAINS,
      fieldMapping: hasKeys(row.fieldMapping) ? row.fieldMapping : NO_MAPPING,
      defaultCountry: row.defaultCountry,
      spamFilter: row.spamFilter,
      loadedAt: now,
    }
    if (generation !== this.generation) return source
    if (this.byDigest.size >= MAX_ENTRIES) this.clear()
    this.byDigest.set(digest, source)
    const digests = this.digestsBySource.get(source.id)
    if (digests === undefined) this.digestsBySource.set(source.id, digest)
    else if (typeof digests === 'string') {
      if (digests !== digest) this.digestsBySource.set(source.id, [digests, digest])
    } else if (!digests.includes(digest)) digests.push(digest)
    return source
  }

  evict(sourceId: string): void {
    this.generation++
    const digests = this.digestsBySource.get(sourceId)
    if (typeof digests === 'string') this.byDigest.delete(digests)
    else for (const digest of digests ?? []) this.byDigest.delete(digest)
    this.digestsBySource.delete(sourceId)
  }

  clear(): void {
    this.generation++
    this.byDigest.clear()
    this.digestsBySource.clear()
  }

  /**
   * Call after every committed change to a source: evicts it here at once and tells every other
   * replica through NOTIFY.
   */
  async announceChange(sourceId: string): Promise<void> {
    this.evict(sourceId)
    await this.ctx.database.notify(SOURCE_CHANNEL, sourceId)
  }
}

function hasKeys(object: object): boolean {
  for (const _ in object) return true
  return false
}
