import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type Browser, chromium } from 'playwright-core'
import { createApp } from '../../src/app'
import type { AppContext } from '../../src/context'
import { createSignedInUser, createSource } from '../helpers/factories'
import { makeTestContext } from '../helpers/test-app'
import {
  CHROMIUM,
  CHROMIUM_ARGS,
  SETUP_TIMEOUT_MS,
  type ServedService,
  serveUnderPath,
  TIMEOUT_MS,
} from './support'

/**
 * /swagger as a developer in a private network sees it: every request that does not go to the
 * service itself is aborted, so a CDN asset would leave the page blank. The page must list the
 * operations and "Try it out" on the inbound POST must store a lead.
 */
let ctx: AppContext
let apiBase: string
let browser: Browser
let stop: () => Promise<void>

beforeAll(async () => {
  // `servers` comes from PUBLIC_BASE_URL, and Swagger UI sends "Try it out" there: the service's own address.
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = probe.port
  probe.stop(true)
  apiBase = `http://127.0.0.1:${port}`
  ctx = await makeTestContext({ env: { PUBLIC_BASE_URL: apiBase } })
  const server = createApp(ctx).listen({ port, hostname: '127.0.0.1' })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  stop = async () => {
    await browser.close()
    await server.server?.stop(true)
    await ctx.close()
  }
}, SETUP_TIMEOUT_MS)

afterAll(() => stop())

describe('Swagger UI at /swagger, offline', () => {
  test(
    'assets come from the service; the operations are listed; Try it out on the inbound POST creates a lead',
    async () => {
      const { organization } = await createSignedInUser(ctx)
      const { apiKey } = await createSource(ctx, organization.id)
      const page = await (await browser.newContext()).newPage()
      const served: string[] = []
      const aborted: string[] = []
      await page.route('**/*', (route) => {
        const url = route.request().url()
        if (url.startsWith(`${apiBase}/`)) {
          served.push(new URL(url).pathname)
          return route.continue()
        }
        aborted.push(url)
        return route.abort()
      })

      await page.goto(`${apiBase}/swagger`)
      await page.locator('.opblock').first().waitFor({ timeout: 15_000 })
      const document = (await (await fetch(`${apiBase}/swagger/json`)).json()) as {
        paths: Record<string, Record<string, unknown>>
        webhooks: Record<string, Record<string, unknown>>
      }
      // Every route and every outbound event (the `webhooks` section) is an operation block.
      const operationCount = [...Object.values(document.paths), ...Object.values(document.webhooks)].reduce(
        (count, item) => count + Object.keys(item).length,
        0,
      )
      expect(Object.keys(document.webhooks).length).toBeGreaterThan(0)
      expect(await page.locator('.opblock').count()).toBe(operationCount)
      expect(served).toEqual(
        expect.arrayContaining([
          '/swagger',
          '/swagger/assets/swagger-ui.css',
          '/swagger/assets/swagger-ui-bundle.js',
        ]),
      )

      const operation = page.locator('#operations-Inbound-receiveLead')
      await operation.locator('.opblock-summary').click()
      await operation.getByRole('button', { name: 'Try it out' }).click()
      await operation.locator('input[placeholder="api_key"]').fill(apiKey)
      await operation.getByRole('button', { name: 'Execute' }).click()
      const status = operation.locator('.live-responses-table .response .response-col_status').first()
      await status.waitFor({ timeout: 15_000 })
      expect((await status.textContent())?.trim()).toBe('200')
      const body = await operation
        .locator('.live-responses-table .response-col_description pre')
        .first()
        .textContent()
      expect(JSON.parse(body ?? '{}')).toMatchObject({ status: 'created', success: true })
      expect(aborted).toEqual([])
    },
    TIMEOUT_MS * 2,
  )
})

describe('Swagger UI at every address it is reached by', () => {
  let underPath: ServedService
  beforeAll(async () => {
    underPath = await serveUnderPath('/crm/leads')
  }, SETUP_TIMEOUT_MS)
  afterAll(() => underPath.stop())

  /**
   * The class: the page itself, with and without a trailing slash (the service answers both with
   * the same page), at the root and behind HAProxy under a path. Every asset and the document must
   * load from the service, so the operations are listed.
   */
  test(
    '/swagger and /swagger/, at the root and under a proxy’s path: the operations are listed, nothing fails to load',
    async () => {
      const entries = [
        `${apiBase}/swagger`,
        `${apiBase}/swagger/`,
        `${underPath.url}/swagger`,
        `${underPath.url}/swagger/`,
      ]
      const results: Array<{ entry: string; operations: number; failed: string[] }> = []
      for (const entry of entries) {
        const context = await browser.newContext()
        const page = await context.newPage()
        const failed: string[] = []
        page.on('response', (response) => {
          if (response.status() >= 400)
            failed.push(`${response.status()} ${new URL(response.url()).pathname}`)
        })
        page.on('requestfailed', (request) => failed.push(`failed ${request.url()}`))
        await page.goto(entry)
        await page
          .locator('.opblock')
          .first()
          .waitFor({ timeout: 10_000 })
          .catch(() => {})
        results.push({
          entry,
          operations: await page.locator('.opblock').count(),
          failed: failed.filter((load) => !load.endsWith('/favicon.ico')),
        })
        await context.close()
      }
      const operations = results[0]!.operations
      expect(operations).toBeGreaterThan(30)
      expect(results).toEqual(entries.map((entry) => ({ entry, operations, failed: [] })))
    },
    TIMEOUT_MS * 2,
  )
})
