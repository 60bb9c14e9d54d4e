import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { checkSecretsKey } from '../../src/modules/webhook-endpoints/secrets-key-check'
import { createOrganization, createWebhookEndpoint } from '../helpers/factories'
import { loggedLines, makeTestApp, makeTestContext } from '../helpers/test-app'

/**
 * The start-up check of the webhook secrets key (src/modules/webhook-endpoints/secrets-key-check.ts,
 * run by src/index.ts): a replica whose keys do not open the stored signing secrets says so once, as
 * an error naming the fix, instead of only delaying each delivery it claims. On the suite's
 * database, with the suite's key (testConfig) and others.
 */
const OTHER_KEY = Buffer.alloc(32, 9).toString('base64')
const TEST_KEY = 'dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI='
const MESSAGE = "webhook secrets: endpoints' signing secrets do not open with this replica's key"

describe('the start-up check of the webhook secrets key', () => {
  let endpointId: string
  const contexts: AppContext[] = []
  const contextWith = async (env: Record<string, string>) => {
    const ctx = await makeTestContext({ env })
    contexts.push(ctx)
    return ctx
  }

  beforeAll(async () => {
    const { ctx, services } = await makeTestApp()
    contexts.push(ctx)
    const organization = await createOrganization(ctx)
    endpointId = (await createWebhookEndpoint(services, organization.id)).id
  })

  afterAll(async () => {
    for (const ctx of contexts) await ctx.close()
  })

  test('the key that sealed them: nothing unopened, nothing logged', async () => {
    const ctx = await contextWith({})
    const result = await checkSecretsKey(ctx)
    expect(result.checked).toBeGreaterThan(0)
    expect(result.unopened).not.toContain(endpointId)
    expect(loggedLines(ctx).filter((line) => String(line.msg).startsWith(MESSAGE))).toEqual([])
  })

  test('another key: the endpoint is unopened and one error line says what to set', async () => {
    const ctx = await contextWith({ WEBHOOK_SECRETS_KEY: OTHER_KEY })
    const result = await checkSecretsKey(ctx)
    expect(result.unopened).toContain(endpointId)
    const lines = loggedLines(ctx).filter((line) => String(line.msg).startsWith(MESSAGE))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({
      level: 'error',
      checked: result.checked,
      unopened: result.unopened.length,
      key: 'WEBHOOK_SECRETS_KEY',
    })
    expect((lines[0]!.endpoint_ids as string[]).length).toBeLessThanOrEqual(5)
    // the keys themselves are never logged
    expect(JSON.stringify(lines[0])).not.toContain(OTHER_KEY)
  })

  test('another key with the sealing one as previous (a rotation): they open', async () => {
    const ctx = await contextWith({ WEBHOOK_SECRETS_KEY: OTHER_KEY, WEBHOOK_SECRETS_PREVIOUS_KEYS: TEST_KEY })
    const result = await checkSecretsKey(ctx)
    expect(result.unopened).not.toContain(endpointId)
  })
})
