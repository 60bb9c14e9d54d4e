import { expect } from 'bun:test'
import postgres from 'postgres'
import { uniqueEmail } from './emails'
import { call, makeSignedInApp, type makeTestApp } from './test-app'

export type App = Awaited<ReturnType<typeof makeTestApp>>['app']

export const BASE = '/api/webhook/sources'
export const RECORD_KEYS = [
  'created_at',
  'default_country',
  'domain_allowlist',
  'enabled',
  'field_mapping',
  'id',
  'ip_allowlist',
  'key_hint',
  'key_rotated_at',
  'last_request_at',
  'name',
  'spam_filter',
  'updated_at',
].sort()
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

export const setup = makeSignedInApp

export async function createViaApi(app: App, token: string, body: Record<string, unknown> = {}) {
  const response = await call(app, token, 'POST', BASE, { name: 'Contact form', ...body })
  expect(response.status).toBe(201)
  return (await response.json()) as Record<string, unknown> & { id: string; api_key: string }
}

export function expectJsonHeaders(response: Response) {
  expect(response.headers.get('content-type')).toContain('application/json')
  expect(response.headers.get('x-request-id')).toBeTruthy()
  expect(response.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/)
  expect(response.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/)
  expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/)
}

/**
 * One item of ingest_leads(jsonb), as the inbound repository builds it (repository.ts ingestItem):
 * `leadId` is its log id, which a lead it creates takes.
 */
export function ingestItem(organizationId: string, sourceId: string, leadId: string) {
  const address = uniqueEmail('race')
  return {
    idx: 0,
    organization_id: organizationId,
    source_id: sourceId,
    log_id: leadId,
    first_name: null,
    last_name: null,
    email: address,
    email_normalized: address,
    phone_raw: null,
    phone_e164: null,
    status: null,
    custom_fields: {},
    attribution: {},
    received_at: new Date().toISOString(),
    client_ip: '127.0.0.1',
    origin: null,
    user_agent: null,
    body_bytes: 2,
    body: '{}',
    body_truncated: false,
    duration_ms: 1,
  }
}

/**
 * Runs `hold` in a transaction on a connection of its own, starts `contender` while that transaction
 * is open, and commits 300 ms later. `settledBeforeCommit` says whether the contender finished before
 * the commit began, i.e. did not wait for the holder.
 */
export async function contendWithOpenTransaction<T>(
  hold: (transaction: postgres.TransactionSql) => Promise<unknown>,
  contender: () => Promise<T>,
): Promise<{ outcome: Promise<T>; settledBeforeCommit: boolean }> {
  const holder = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  let outcome: Promise<T> | undefined
  let settledBeforeCommit = false
  // Set as the transaction is about to commit: a contender that settles later did wait for it.
  let committing = false
  const settled = () => {
    if (!committing) settledBeforeCommit = true
  }
  try {
    await holder.begin(async (transaction) => {
      await hold(transaction)
      outcome = contender()
      void outcome.then(settled, settled)
      await Bun.sleep(300)
      committing = true
    })
  } finally {
    await holder.end()
  }
  return { outcome: outcome!, settledBeforeCommit }
}

/** Polls until the check passes or the time runs out; returns whether it passed in time. */
export async function within(milliseconds: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = performance.now() + milliseconds
  while (performance.now() < deadline) {
    if (await check()) return true
    await Bun.sleep(10)
  }
  return check()
}
