import type { FakeClock } from '../../src/lib/clock'
import type { Services } from '../../src/services'
import { uniqueEmail } from './emails'
import { createSignedInUser, createSource } from './factories'
import { makeTestApp, request } from './test-app'

type App = Awaited<ReturnType<typeof makeTestApp>>['app']

/** An app on a fake clock, a signed-in owner and one source whose IP allow list is 10.0.0.0/8. */
export async function setupSource(clock: FakeClock, sourceOptions: Parameters<typeof createSource>[2] = {}) {
  const { app, ctx, services } = await makeTestApp({ clock })
  const { organization, token } = await createSignedInUser(ctx)
  const { source, apiKey } = await createSource(ctx, organization.id, {
    ipAllowlist: ['10.0.0.0/8'],
    ...sourceOptions,
  })
  return { app, ctx, services, organization, token, source, apiKey }
}

const ALLOWED_IP = { 'x-forwarded-for': '10.1.2.3' }

export const email = () => uniqueEmail('lead')

export function post(app: App, apiKey: string, json: unknown, headers: Record<string, string> = {}) {
  return app.handle(
    request('POST', `/api/webhook/lead/${apiKey}`, { json, headers: { ...ALLOWED_IP, ...headers } }),
  )
}

export function postRaw(app: App, apiKey: string, body: string, headers: Record<string, string> = {}) {
  return app.handle(
    request('POST', `/api/webhook/lead/${apiKey}`, {
      body,
      headers: { 'content-type': 'application/json', ...ALLOWED_IP, ...headers },
    }),
  )
}

/** What one kind of inbound request is logged as. */
export interface Expected {
  outcome: string
  http_status: number
  reason: string | null
}

/**
 * One request of each kind the logs distinguish, 1 s apart on the fake clock: created, updated,
 * spam, error, 400 invalid_json, 400 validation_failed, 403 ip_not_allowed, 413. Returns what each
 * must be logged as, oldest first.
 */
export async function sendMix(app: App, apiKey: string, clock: FakeClock): Promise<Expected[]> {
  const address = email()
  const steps: Array<[() => Promise<Response>, number, Expected]> = [
    [
      () => post(app, apiKey, { email: address }),
      200,
      { outcome: 'created', http_status: 200, reason: null },
    ],
    [
      () => post(app, apiKey, { email: address }),
      200,
      { outcome: 'updated', http_status: 200, reason: null },
    ],
    [
      () => post(app, apiKey, { email: email(), _gotcha: 'bot' }),
      200,
      { outcome: 'spam', http_status: 200, reason: 'honeypot_filled:_gotcha' },
    ],
    [
      () => post(app, apiKey, { first_name: 'Nobody' }),
      200,
      { outcome: 'error', http_status: 200, reason: 'missing_contact' },
    ],
    [
      () => postRaw(app, apiKey, '{not json'),
      400,
      { outcome: 'rejected', http_status: 400, reason: 'invalid_json' },
    ],
    [
      () => post(app, apiKey, { email: email(), first_name: 42 }),
      400,
      { outcome: 'rejected', http_status: 400, reason: 'validation_failed' },
    ],
    [
      () => post(app, apiKey, { email: email() }, { 'x-forwarded-for': '192.0.2.7' }),
      403,
      { outcome: 'rejected', http_status: 403, reason: 'ip_not_allowed' },
    ],
    [
      () => postRaw(app, apiKey, JSON.stringify({ email: email(), pad: 'x'.repeat(110_000) })),
      413,
      { outcome: 'rejected', http_status: 413, reason: 'payload_too_large' },
    ],
  ]
  const expected: Expected[] = []
  for (const [send, status, logged] of steps) {
    const response = await send()
    if (response.status !== status)
      throw new Error(`expected ${status}, got ${response.status}: ${await response.text()}`)
    expected.push(logged)
    clock.advance(1000)
  }
  return expected
}

/**
 * Fills the key's 60-per-minute window with created leads (the mix counts towards it), then sends
 * `count` more, which are all 429, and flushes the aggregator so their rows are written.
 */
export async function floodUntilLimited(
  services: Pick<Services, 'inbound'>,
  app: App,
  apiKey: string,
  sentThisMinute: number,
  count: number,
) {
  for (let index = sentThisMinute; index < 60; index++) {
    const response = await post(app, apiKey, { email: email() })
    if (response.status !== 200) throw new Error(`filler request got ${response.status}`)
  }
  for (let index = 0; index < count; index++) {
    const response = await post(app, apiKey, { email: email() })
    if (response.status !== 429) throw new Error(`flood request got ${response.status}`)
  }
  await services.inbound.rejections.flush()
  return 60 - sentThisMinute
}

export function get(app: App, path: string, token?: string) {
  return app.handle(request('GET', path, { token }))
}
