import { and, eq, gt, or, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { webhookSources } from '../../db/schema'
import { type Cidr, parseCidrList } from '../../lib/ip'

/** What the inbound path needs of a source, with allow lists pre-parsed once. */
export interface CachedSource {
  id: string
  organizationId: string
  name: string
  enabled: boolean
  keyDigest: string
  /** The old key's digest while a regeneration grace window runs. */
  previousKeyDigest: string | null
  previousKeyExpiresAt: number | null
  ipAllowlist: string[]
  ipRanges: Cidr[]
  domainAllowlist: string[]
  fieldMapping: Record<string, string>
  defaultCountry: string | null
  spamFilter: boolean
  loadedAt: number
}

export const SOURCE_CHANNEL = 'lead_capture_source_changed'
// Belt and braces: even if a notification were lost, no entry lives longer than this. Changes
// normally arrive by NOTIFY within milliseconds; this only bounds the damage of a lost one.
const MAX_ENTRY_AGE_MS = 300_000
const MAX_ENTRIES = 50_000

/**
 * Sources by key digest, kept in memory so the inbound path does no lookup query. Every change to
 * a source (update, disable, key regeneration, delete) is announced with NOTIFY on SOURCE_CHANNEL;
 * every replica LISTENs and drops the entry, so a change reaches all replicas well within 1 s.
 * When the listening connection drops and comes back the whole cache is dropped, since
 * notifications sent meanwhile are lost.
 */
export class SourceCache {
  private readonly byDigest = new Map<string, CachedSource | null>()
  private readonly digestsBySource = new Map<string, Set<string>>()
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
    if (cached !== undefined && cached !== null && now - cached.loadedAt < MAX_ENTRY_AGE_MS) {
      if (cached.keyDigest === digest) return cached
      if (cached.previousKeyExpiresAt !== null && cached.previousKeyExpiresAt > now) return cached
    }
    const generation = this.generation
    const [row] = await this.lookup.execute({ digest, now: new Date(now).toISOString() })
    if (!row) return null
    const source: CachedSource = {
      id: row.id,
      organizationId: row.organizationId,
      name: row.name,
      enabled: row.enabled,
      keyDigest: row.keyDigest,
      previousKeyDigest: row.previousKeyDigest,
      previousKeyExpiresAt: row.previousKeyExpiresAt?.getTime() ?? null,
      ipAllowlist: row.ipAllowlist,
      ipRanges: parseCidrList(row.ipAllowlist),
      domainAllowlist: row.domainAllowlist.map((domain) => domain.toLowerCase()),
      fieldMapping: row.fieldMapping,
      defaultCountry: row.defaultCountry,
      spamFilter: row.spamFilter,
      loadedAt: now,
    }
    if (generation !== this.generation) return source
    if (this.byDigest.size >= MAX_ENTRIES) this.clear()
    this.byDigest.set(digest, source)
    let digests = this.digestsBySource.get(source.id)
    if (!digests) {
      digests = new Set()
      this.digestsBySource.set(source.id, digests)
    }
    digests.add(digest)
    return source
  }

  evict(sourceId: string): void {
    this.generation++
    for (const digest of this.digestsBySource.get(sourceId) ?? []) this.byDigest.delete(digest)
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
