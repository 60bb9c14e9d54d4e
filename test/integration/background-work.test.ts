import { afterAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookSources } from '../../src/db/schema'
import { periodicJobs, startBackgroundWork, writeBehindBuffers } from '../../src/jobs'
import { FakeClock } from '../../src/lib/clock'
import { post } from '../helpers/delivery-traffic'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSource, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp } from '../helpers/test-app'
import { startReceiver } from '../helpers/webhook-receiver'

/**
 * src/jobs.ts: the background work of a replica runs on the app's own services (one delivery
 * signal, one worker, one set of buffers), and ctx.close() stops and flushes all of it.
 */
const receivers: Array<{ stop(): void }> = []
afterAll(() => {
  for (const receiver of receivers.splice(0)) receiver.stop()
})

describe('background work (src/jobs.ts)', () => {
  test('one list: the periodic jobs by name, the write-behind buffers of the inbound route', async () => {
    const { ctx, services } = await makeTestApp()
    expect(periodicJobs(ctx, services).map((job) => job.name)).toEqual([
      'delivery-log roll-up',
      'log retention',
      'webhook deliveries',
      'source.status_changed events',
      'pat.expiring events',
      'webhook message retention',
      'planner statistics',
    ])
    expect(writeBehindBuffers(services)).toEqual([services.inbound.rejections, services.inbound.lastRequests])
    await ctx.close()
  })

  test('ctx.close() flushes the write-behind buffers: last_request_at is written at once, not after its interval', async () => {
    const clock = new FakeClock(Date.UTC(2026, 3, 1, 9))
    const { app, ctx } = await makeTestApp({ clock })
    const organization = await createOrganization(ctx)
    const { source, apiKey } = await createSource(ctx, organization.id)
    expect((await post(app, apiKey, { email: uniqueEmail('close') })).status).toBe(200)
    const lastRequestAt = async () =>
      (await ctx.db.select().from(webhookSources).where(eq(webhookSources.id, source.id)))[0]!.lastRequestAt
    // Noted in memory only: the recorder writes every 5 s.
    expect(await lastRequestAt()).toBeNull()
    await ctx.close()
    expect(await lastRequestAt()).toEqual(new Date(Date.UTC(2026, 3, 1, 9)))
  })

  test("the worker started by startBackgroundWork is the app's: a lead's event reaches its endpoint with nobody calling it", async () => {
    const { app, ctx, services } = await makeTestApp()
    const receiver = startReceiver()
    receivers.push(receiver)
    const organization = await createOrganization(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    await createWebhookEndpoint(services, organization.id, {
      url: receiver.url,
      event_types: ['lead.created'],
    })
    startBackgroundWork(ctx, services)
    try {
      expect((await post(app, apiKey, { email: uniqueEmail('worker') })).status).toBe(200)
      // Woken by the ingest through the shared delivery signal (or, at worst, by the 1 s poll).
      const deadline = performance.now() + 20_000
      while (receiver.received.length === 0 && performance.now() < deadline) await Bun.sleep(10)
      expect(receiver.received.map((entry) => entry.json.type)).toEqual(['lead.created'])
    } finally {
      await ctx.close()
    }
  })
})
