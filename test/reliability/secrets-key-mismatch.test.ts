import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { cleanupAll, createTestDatabase, seedThroughApi, spawnReplica, type TestDatabase } from './support'

/**
 * Replicas on one database with different webhook secrets keys (each with a key of its own in its
 * DATA_DIR, or a new key set without the old one as previous): the one whose key does not open the
 * stored signing secrets says so at start, as an error, and still serves. Before, it only logged
 * per claimed delivery, which waited for its lease.
 */
const KEY_A = Buffer.alloc(32, 1).toString('base64')
const KEY_B = Buffer.alloc(32, 2).toString('base64')
const MESSAGE = "webhook secrets: endpoints' signing secrets do not open with this replica's key"

describe.skipIf(!process.env.DATABASE_URL)('replicas with different webhook secrets keys', () => {
  let database: TestDatabase

  beforeAll(async () => {
    database = await createTestDatabase()
    const replica = await spawnReplica({
      env: {
        DATABASE_URL: database.url,
        WEBHOOK_SECRETS_KEY: KEY_A,
        OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'true',
      },
    })
    const { token } = await seedThroughApi(replica.url, 0)
    const endpoint = await fetch(`${replica.url}/api/v2/webhook-endpoints`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ url: 'http://127.0.0.1:9/lead-capture' }),
    })
    expect(endpoint.status).toBe(201)
    expect(replica.output()).not.toContain(MESSAGE)
    expect(await replica.stop()).toBe(0)
  }, 60_000)

  afterAll(async () => {
    await database?.drop()
    await cleanupAll()
  })

  test.each([
    ['another key', { WEBHOOK_SECRETS_KEY: KEY_B }, true],
    [
      'another key, the first as previous',
      { WEBHOOK_SECRETS_KEY: KEY_B, WEBHOOK_SECRETS_PREVIOUS_KEYS: KEY_A },
      false,
    ],
    ['the same key', { WEBHOOK_SECRETS_KEY: KEY_A }, false],
  ] as const)(
    '%s: ready, and the error line at start only when the key does not open them',
    async (_, keys, reported) => {
      const replica = await spawnReplica({ env: { DATABASE_URL: database.url, ...keys } })
      try {
        expect((await fetch(`${replica.url}/readyz`)).status).toBe(200)
        const lines = replica
          .output()
          .split('\n')
          .filter((line) => line.includes(MESSAGE))
        expect(lines).toHaveLength(reported ? 1 : 0)
        if (reported) {
          expect(JSON.parse(lines[0]!)).toMatchObject({
            level: 'error',
            checked: 1,
            unopened: 1,
            key: 'WEBHOOK_SECRETS_KEY',
          })
          expect(lines[0]).not.toContain(KEY_A)
          expect(lines[0]).not.toContain(KEY_B)
        }
      } finally {
        expect(await replica.stop()).toBe(0)
      }
    },
    60_000,
  )
})
