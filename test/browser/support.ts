import { existsSync } from 'node:fs'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { createApp } from '../../src/app'
import type { AppContext } from '../../src/context'
import type { Lead } from '../../src/modules/leads/model'
import { createPat, createSignedInUser } from '../helpers/factories'
import { makeTestContext } from '../helpers/test-app'
import { freePort, haproxyAvailable, startHaproxy } from '../reliability/support'

/**
 * Shared harness of the browser tests: the real HTTP server, a second server on another port for
 * the website (so the page's origin differs from the API's and CORS is exercised exactly as on a
 * customer's website), and one headless Chromium per test file with a fresh context per page.
 */
export const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM)) {
  // CI installs it (.ci/run); a missing browser must fail loudly, never skip these tests.
  throw new Error(`the browser tests need Chromium at ${CHROMIUM}: apt-get install chromium`)
}
// Page loads, navigations and the 1.6 s waits for the spam filter outgrow bun's 5 s default.
export const TIMEOUT_MS = 30_000
// Opening and migrating the embedded database plus launching Chromium can be slow on a busy CI box.
export const SETUP_TIMEOUT_MS = 120_000
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

export interface PageSubmission {
  path: string
  fields: Record<string, string>
}

export interface OpenedPage {
  page: Page
  console: string[]
  /** Raw bodies of the POSTs to the webhook, as the browser sent them. */
  sent: string[]
}

export interface BrowserHarness {
  ctx: AppContext
  apiBase: string
  siteBase: string
  organizationId: string
  /** Path → HTML body the site serves (the tracker tag is prepended by sitePage). */
  pages: Map<string, string>
  /** The page's own form posts to the site, recorded to prove the tracker left them alone. */
  pageSubmissions: PageSubmission[]
  webhookUrl(apiKey: string): string
  sitePage(
    path: string,
    apiKey: string,
    body: string,
    attributes?: { debug?: boolean; forms?: 'auto' },
  ): string
  newPage(initScript?: string): Promise<OpenedPage>
  /** Leads of a source as `GET /api/v2/leads?source_id=` answers them (a PAT with leads.read). */
  leadsOf(sourceId: string): Promise<Lead[]>
  closeContexts(): Promise<void>
  stop(): Promise<void>
}

export async function startBrowserHarness(): Promise<BrowserHarness> {
  const ctx = await makeTestContext()
  const api = createApp(ctx).listen({ port: 0, hostname: '127.0.0.1' })
  const apiBase = `http://127.0.0.1:${api.server!.port}`
  const pages = new Map<string, string>()
  const pageSubmissions: PageSubmission[] = []
  const site = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const url = new URL(request.url)
      if (request.method === 'POST') {
        const form = await request.formData()
        const fields: Record<string, string> = {}
        for (const [name, value] of form) fields[name] = String(value)
        pageSubmissions.push({ path: url.pathname, fields })
        return html('<p>Thanks!</p>')
      }
      const page = pages.get(url.pathname)
      return page ? html(page) : new Response('not found', { status: 404 })
    },
  })
  const siteBase = `http://127.0.0.1:${site.port}`
  const { organization, user } = await createSignedInUser(ctx)
  const { token } = await createPat(ctx, user, { scopes: ['leads.read'] })
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  const contexts: BrowserContext[] = []
  const webhookUrl = (apiKey: string) => `${apiBase}/api/webhook/lead/${apiKey}`

  return {
    ctx,
    apiBase,
    siteBase,
    organizationId: organization.id,
    pages,
    pageSubmissions,
    webhookUrl,
    sitePage(path, apiKey, body, attributes = {}) {
      // The snippet the README tells users to paste.
      const extra = `${attributes.debug ? ' data-debug' : ''}${attributes.forms ? ` data-forms="${attributes.forms}"` : ''}`
      pages.set(
        path,
        `<script async src="${apiBase}/api/webhook/tracker.js" data-webhook-url="${webhookUrl(apiKey)}"${extra}></script>${body}`,
      )
      return `${siteBase}${path}`
    },
    async newPage(initScript) {
      const context = await browser.newContext()
      contexts.push(context)
      if (initScript) await context.addInitScript(initScript)
      const page = await context.newPage()
      const lines: string[] = []
      const sent: string[] = []
      page.on('console', (message) => lines.push(`${message.type()}: ${message.text()}`))
      page.on('request', (request) => {
        if (request.url().startsWith(`${apiBase}/api/webhook/lead/`) && request.method() === 'POST') {
          sent.push(request.postData() ?? '')
        }
      })
      return { page, console: lines, sent }
    },
    async leadsOf(sourceId) {
      const response = await fetch(`${apiBase}/api/v2/leads?source_id=${sourceId}`, {
        headers: { authorization: `Bearer ${token}` },
      })
      if (response.status !== 200)
        throw new Error(`GET /api/v2/leads: ${response.status} ${await response.text()}`)
      return ((await response.json()) as { data: Lead[] }).data
    },
    async closeContexts() {
      await Promise.all(contexts.splice(0).map((context) => context.close()))
    },
    async stop() {
      await browser.close()
      site.stop(true)
      await api.server?.stop(true)
      await ctx.close()
    },
  }
}

function html(body: string): Response {
  return new Response(`<!doctype html><html><head><meta charset="utf-8"></head><body>${body}</body></html>`, {
    headers: { 'content-type': 'text/html; charset=utf-8' },
  })
}

/** Opens the URL and waits until tracker.js has run. */
export async function loaded(page: Page, url: string): Promise<void> {
  await page.goto(url)
  await page.waitForFunction(() => 'LeadCapture' in window)
}

export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(50)
  }
}

export { forbiddenIn } from '../helpers/forbidden'

/** A service started for a browser test: its address as the browser reaches it. */
export interface ServedService {
  ctx: AppContext
  /** The origin the browser talks to: the service's own, or HAProxy's in front of it. */
  origin: string
  /** PUBLIC_BASE_URL's path ('' at the root). */
  prefix: string
  /** origin + prefix: PUBLIC_BASE_URL. */
  url: string
  stop(): Promise<void>
}

/** A service on a loopback port of its own, served at its root (PUBLIC_BASE_URL is its own address). */
export async function serveAtRoot(): Promise<ServedService> {
  const port = freePort()
  const origin = `http://127.0.0.1:${port}`
  const ctx = await makeTestContext({ env: { PUBLIC_BASE_URL: origin } })
  const server = createApp(ctx).listen({ port, hostname: '127.0.0.1' })
  return {
    ctx,
    origin,
    prefix: '',
    url: origin,
    stop: async () => {
      await server.server?.stop(true)
      await ctx.close()
    },
  }
}

/**
 * A service behind HAProxy under `prefix` of a shared host: HAProxy strips the prefix, the service's
 * PUBLIC_BASE_URL is HAProxy's address with it, and any path outside the prefix is HAProxy's own 404
 * (docs/operations.md, "Under a path of a shared host"). HAProxy is stopped by `stop`.
 */
export async function serveUnderPath(prefix: string): Promise<ServedService> {
  if (!haproxyAvailable()) {
    // CI installs it (.ci/run); a test behind a proxy must fail loudly, never skip.
    throw new Error('this browser test needs HAProxy: apt-get install haproxy')
  }
  // HAProxy's port must be known before the service behind it starts: its PUBLIC_BASE_URL names it.
  const backendPort = freePort()
  const haproxy = await startHaproxy(
    (port, statsPort) => `
global
  maxconn 200

defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s

frontend site
  bind 127.0.0.1:${port}
  acl service path_beg ${prefix}/
  http-request return status 404 content-type text/plain string "not under ${prefix}" unless service
  http-request replace-path ${prefix}(/.*) \\1
  default_backend service

backend service
  server s0 127.0.0.1:${backendPort}

listen stats
  bind 127.0.0.1:${statsPort}
  stats enable
  stats uri /stats
`,
  )
  const url = `${haproxy.url}${prefix}`
  const ctx = await makeTestContext({ env: { PUBLIC_BASE_URL: url } })
  const server = createApp(ctx).listen({ port: backendPort, hostname: '127.0.0.1' })
  return {
    ctx,
    origin: haproxy.url,
    prefix,
    url,
    stop: async () => {
      await server.server?.stop(true)
      await ctx.close()
      await haproxy.stop()
    },
  }
}
