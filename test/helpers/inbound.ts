import { desc, eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { deliveryLogs } from '../../src/db/schema'
import { systemClock } from '../../src/lib/clock'
import { createMemoryLogger } from '../../src/lib/logger'
import { GroupCommitWriter } from '../../src/modules/inbound/group-commit'
import type { NormalizedLead } from '../../src/modules/inbound/normalize'
import { InboundPressure } from '../../src/modules/inbound/pressure'
import type { InboundRepository, IngestItem, IngestRow } from '../../src/modules/inbound/repository'
import type { DeliverySignal } from '../../src/modules/webhook-endpoints/signal'
import { uniqueEmail } from './emails'
import { createOrganization, createSource } from './factories'
import { makeTestApp, request, type TestAppOptions, testConfig } from './test-app'

export type App = Awaited<ReturnType<typeof makeTestApp>>['app']

/** An app, an organization of its own and one source with its key. */
export async function setup(
  sourceOptions: Parameters<typeof createSource>[2] = {},
  appOptions: TestAppOptions = {},
) {
  const { app, ctx, services } = await makeTestApp(appOptions)
  const organization = await createOrganization(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, sourceOptions)
  return { app, ctx, services, organization, source, apiKey }
}

export const post = (app: App, apiKey: string, json: unknown, headers: Record<string, string> = {}) =>
  app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { json, headers }))

export const email = () => uniqueEmail('lead')

/** A lead as the inbound pipeline hands it to the group-commit writer. */
export function leadWithEmail(address: string): NormalizedLead {
  return {
    firstName: null,
    lastName: null,
    email: address,
    emailNormalized: address,
    phoneRaw: null,
    phoneE164: null,
    status: null,
    customFields: {},
    attribution: {},
    signals: {},
  }
}

export function requestFacts() {
  return {
    receivedAt: new Date(),
    clientIp: '127.0.0.1',
    origin: null,
    userAgent: null,
    bodyBytes: 2,
    body: '{}',
    bodyTruncated: false,
    durationMs: 1,
  }
}

/** A source's delivery-log entries, newest first. */
export async function logsOf(ctx: AppContext, sourceId: string) {
  return ctx.db
    .select()
    .from(deliveryLogs)
    .where(eq(deliveryLogs.sourceId, sourceId))
    .orderBy(desc(deliveryLogs.id))
}

/**
 * How a source's delivery-log entries were committed: the number of entries of each transaction,
 * oldest first. A stored lead's entry is written by the same ingest_leads() call as the lead, so
 * the entries of one group share that call's transaction id (PostgreSQL's `xmin`): a group of n
 * leads is one n, a lead written alone (or retried alone after its group failed) is a 1.
 */
export async function commitSizes(ctx: AppContext, sourceId: string): Promise<number[]> {
  const rows = await ctx.database.query<{ entries: number }>(
    `select count(*)::int as entries from delivery_logs where source_id = $1
      group by xmin::text order by min(id::text)`,
    [sourceId],
  )
  return rows.map((row) => row.entries)
}

/**
 * Calls ingest_leads() with a group of two items that share a dedup key, which the function refuses
 * as a whole (LC409); returns that error. For the tests that a refused group writes nothing.
 */
export async function ingestConflictingGroup(
  ctx: AppContext,
  organizationId: string,
  sourceId: string,
): Promise<{ code?: string; message: string }> {
  const address = email()
  const item = (idx: number) => ({
    idx,
    organization_id: organizationId,
    source_id: sourceId,
    log_id: crypto.randomUUID(),
    email: address,
    email_normalized: address,
    custom_fields: {},
    attribution: {},
    received_at: new Date(ctx.clock.now()).toISOString(),
    client_ip: '127.0.0.1',
    body_bytes: 2,
    body_truncated: false,
    duration_ms: 1,
  })
  return ctx.database
    .query('select * from ingest_leads($1::jsonb)', [JSON.stringify([item(0), item(1)])])
    .then(
      () => ({ message: 'ingest_leads accepted a group whose items share a dedup key' }),
      (error: { code?: string; message: string }) => error,
    )
}

/**
 * A group-commit writer on a faked repository and database: `env` as the service's, a pool of
 * DATABASE_POOL_SIZE connections; `pipeline`: the group commit has a connection of its own.
 */
export function groupCommitWriter(
  env: Record<string, string>,
  repository: InboundRepository,
  options: { pipeline?: boolean } = {},
): GroupCommitWriter {
  const config = testConfig(env)
  const ctx = {
    config,
    // postgres.js sends a statement on every pooled connection (src/db/client.ts); `pipeline`: the
    // group commit has a connection of its own (the repository, faked here, would use it).
    database: {
      engine: 'postgres',
      queryConcurrency: config.databasePoolSize,
      pipeline: options.pipeline ? { query: () => Promise.reject(new Error('not here')) } : null,
    },
    logger: createMemoryLogger('silent'),
  } as unknown as AppContext
  return new GroupCommitWriter(
    ctx,
    repository,
    { wake: () => {} } as unknown as DeliverySignal,
    new InboundPressure(systemClock),
  )
}

/** The rows ingest_leads() gives for `items` when each is a new lead within its key's limit. */
export function createdRows(items: readonly IngestItem[]): IngestRow[] {
  return items.map((item) => ({
    idx: item.idx,
    lead_id: item.log_id,
    outcome: 'created' as const,
    webhook_events: false,
    remaining: 59,
    reset_ms: 60_000,
  }))
}
