import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { type Browser, chromium, type Page } from 'playwright-core'
import { csvRecords } from '../helpers/csv'
import {
  CHROMIUM,
  CHROMIUM_ARGS,
  SETUP_TIMEOUT_MS,
  type ServedService,
  serveAtRoot,
  serveUnderPath,
  TIMEOUT_MS,
} from './support'

/**
 * The dashboard in a real browser (issue [8]): the whole journey a new user takes, a cross-site
 * form post, the cookie's HttpOnly flag, and axe-core on every page visited. Screenshots go to
 * test/browser/artifacts/ (git-ignored; CI keeps them).
 */
const ARTIFACTS = new URL('./artifacts/', import.meta.url).pathname
const AXE_SOURCE = await readFile(Bun.resolveSync('axe-core/axe.min.js', import.meta.dir), 'utf8')
const PASSWORD = 'correct horse battery staple'

let browser: Browser
let base: string
let direct: Site
let proxied: Site
let stopServers: () => Promise<void>
const axeFindings: Array<{ page: string; id: string; impact: string; nodes: number }> = []

// The path HAProxy serves the second service under, stripping it before the service sees a request.
const PROXY_PREFIX = '/crm/leads'

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true })
  const atRoot = await serveAtRoot()
  const underPath = await serveUnderPath(PROXY_PREFIX)
  base = atRoot.url
  direct = { name: 'root', ...atRoot }
  proxied = { name: 'proxied', ...underPath }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  stopServers = async () => {
    await browser.close()
    await atRoot.stop()
    await underPath.stop()
  }
}, SETUP_TIMEOUT_MS)

afterAll(async () => {
  await stopServers?.()
})

interface AxeResult {
  passes: unknown[]
  violations: Array<{ id: string; impact: string; nodes: unknown[] }>
}

/** axe-core in the page (evaluated, so the page's CSP need not allow it); serious and critical kept. */
async function audit(page: Page, label: string) {
  await page.evaluate(AXE_SOURCE)
  const audited = await page.evaluate(async () => {
    const { axe } = window as unknown as { axe: { run: (context: Document) => Promise<AxeResult> } }
    const result = await axe.run(document)
    return {
      passes: result.passes.length,
      violations: result.violations.map((violation) => ({
        id: violation.id,
        impact: violation.impact,
        nodes: violation.nodes.length,
      })),
    }
  })
  // axe ran and checked rules: a page it could not audit would pass nothing.
  expect(audited.passes).toBeGreaterThan(10)
  for (const violation of audited.violations) axeFindings.push({ page: label, ...violation })
  return audited.violations.filter(
    (violation) => violation.impact === 'serious' || violation.impact === 'critical',
  )
}

async function shot(page: Page, name: string) {
  await page.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true })
}

async function visit(page: Page, label: string) {
  expect({ page: label, serious: await audit(page, label) }).toEqual({ page: label, serious: [] })
  await shot(page, label)
}

async function postLead(url: string, body: string) {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
}

/** Where the browser finds the dashboard (its test name: the screenshots' prefix). */
type Site = ServedService & { name: string }

/**
 * sign-up → source → copy URL → leads and chart → logs and a failed body → new key → CSV → edit and delete a lead → delete a source → PAT → members (role, removal) → viewer
 */
async function journey(site: Site) {
  const context = await browser.newContext({
    viewport: { width: 1100, height: 900 },
    acceptDownloads: true,
  })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: site.origin })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  // Failed loads are checked by URL below (the viewer's 403 is deliberate); other console errors count.
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
      errors.push(message.text())
    }
  })
  const failedLoads: string[] = []
  page.on('response', (response) => {
    if (response.status() >= 400) failedLoads.push(`${response.status()} ${new URL(response.url()).pathname}`)
  })

  // A first visit lands on the sign-in page; sign up from there.
  await page.goto(`${site.url}/`)
  expect(new URL(page.url()).pathname).toBe(`${site.prefix}/app/sign-in`)
  await visit(page, `${site.name}-01-sign-in`)
  await page.getByRole('link', { name: 'Create an account' }).click()
  await visit(page, `${site.name}-02-sign-up`)
  const email = `owner-${crypto.randomUUID()}@example.com`
  await page.getByLabel('Organization name').fill('Acme Ltd')
  await page.getByLabel('E-mail').fill(email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Create account' }).click()
  await page.waitForURL(`${site.url}/app/sources`)
  // The session cookie is invisible to scripts.
  expect(await page.evaluate(() => document.cookie)).not.toContain('lc_session')
  const cookie = (await context.cookies()).find((entry) => entry.name === 'lc_session')!
  expect({ httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path }).toEqual({
    httpOnly: true,
    sameSite: 'Strict',
    path: `${site.prefix}/app`,
  })
  await visit(page, `${site.name}-03-sources-empty`)

  // Create a source; the URL is shown once, with a copy button.
  await page.getByLabel('New source name').fill('Contact form')
  await page.getByRole('button', { name: 'Create source' }).click()
  await page.getByRole('heading', { name: 'Source created' }).waitFor()
  const shownUrl = await page.getByLabel('Webhook URL').inputValue()
  await page.getByRole('button', { name: 'Copy' }).click()
  await page.getByText('Copied.').waitFor()
  const copied = await page.evaluate(() => navigator.clipboard.readText())
  expect(copied).toBe(shownUrl)
  expect(copied).toStartWith(`${site.url}/api/webhook/lead/`)
  await visit(page, `${site.name}-04-source-created`)
  const sourcePath = await page.evaluate(() => {
    const form = document.querySelector('form[action$="/regenerate-key"]') as HTMLFormElement
    return new URL(form.action).pathname.replace('/regenerate-key', '')
  })

  // Leads posted by the test appear, and the chart counts them.
  for (let index = 0; index < 3; index++) {
    expect(
      (
        await postLead(
          copied,
          JSON.stringify({ email: `lead-${index}@example.com`, first_name: `Lead ${index}` }),
        )
      ).status,
    ).toBe(200)
  }
  const noContact = JSON.stringify({ first_name: 'Nobody', note: 'no e-mail, no phone' })
  expect((await postLead(copied, noContact)).status).toBe(200)
  expect((await postLead(copied, '{"broken json')).status).toBe(400)
  await page.goto(`${site.origin}${sourcePath}`)
  await page.locator('.uplot canvas').first().waitFor()
  const chart = JSON.parse((await page.locator('#hourly-chart-data').textContent())!)
  const sum = (outcome: string) =>
    (chart.series[outcome] as number[]).reduce((total, value) => total + value, 0)
  expect({ created: sum('created'), error: sum('error'), rejected: sum('rejected') }).toEqual({
    created: 3,
    error: 1,
    rejected: 1,
  })
  // Hovering the current hour's bar shows its values in the legend.
  const box = (await page.locator('.uplot .u-over').boundingBox())!
  await page.mouse.move(box.x + box.width - 3, box.y + box.height - 5)
  await expect(page.locator('.uplot .u-legend').textContent()).resolves.toContain('created')
  const legendValues = await page.locator('.uplot .u-legend .u-value').allTextContents()
  expect(legendValues).toContain('3')
  await visit(page, `${site.name}-05-source-with-traffic`)

  // Logs: filter on errors (htmx swaps the results), open the failed entry's body.
  await page.getByRole('link', { name: 'All delivery logs' }).click()
  await page.waitForURL(`${site.origin}${sourcePath}/logs`)
  await visit(page, `${site.name}-06-logs`)
  await page.getByLabel('Outcome').selectOption('error')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/outcome=error/)
  const rows = page.locator('#log-results tbody tr')
  await expect(rows.count()).resolves.toBe(1)
  await rows.first().getByRole('link').click()
  await page.locator('pre.body').waitFor()
  expect(JSON.parse((await page.locator('pre.body').textContent())!)).toEqual(JSON.parse(noContact))
  await visit(page, `${site.name}-07-log-entry`)

  // Regenerate the key: a new URL, shown once; the old one stops.
  await page.goto(`${site.origin}${sourcePath}`)
  await page.getByLabel('Old key keeps working for').selectOption('0')
  await page.getByRole('button', { name: 'Regenerate key' }).click()
  await page.getByRole('heading', { name: 'Key regenerated' }).waitFor()
  const newUrl = await page.getByLabel('Webhook URL').inputValue()
  expect(newUrl).not.toBe(copied)
  expect((await postLead(copied, JSON.stringify({ email: 'late@example.com' }))).status).toBe(404)
  expect((await postLead(newUrl, JSON.stringify({ email: 'after@example.com' }))).status).toBe(200)
  await visit(page, `${site.name}-08-key-regenerated`)

  // Leads: search, then export the CSV and read it.
  await page.getByRole('link', { name: 'Leads' }).click()
  await page.waitForURL(`${site.url}/app/leads`)
  await expect(page.locator('#lead-results tbody tr').count()).resolves.toBe(4)
  await page.getByLabel('Search e-mail or phone').fill('lead-1')
  await page.getByRole('button', { name: 'Search' }).click()
  await page.waitForURL(/q=lead-1/)
  await expect(page.locator('#lead-results tbody tr').count()).resolves.toBe(1)
  await visit(page, `${site.name}-09-leads-search`)
  await page.goto(`${site.url}/app/leads`)
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Export these leads as CSV' }).click(),
  ])
  expect(download.suggestedFilename()).toMatch(/^leads-\d{8}-\d{4}\.csv$/)
  const records = csvRecords(await readFile((await download.path())!, 'utf8'))
  expect(records.map((record) => record.email).sort()).toEqual([
    'after@example.com',
    'lead-0@example.com',
    'lead-1@example.com',
    'lead-2@example.com',
  ])

  // A lead: opened from the list, edited, and another one deleted after its confirmation page
  // (confirmed from the keyboard).
  await page.getByRole('link', { name: 'Lead 0' }).click()
  await page.getByRole('heading', { name: 'Lead 0' }).waitFor()
  await page.getByLabel('Status').fill('qualified')
  await page.getByLabel('Last name').fill('Lovelace')
  await page.getByRole('button', { name: 'Save lead' }).click()
  await page.getByText('Lead saved.').waitFor()
  await expect(page.getByLabel('Status').inputValue()).resolves.toBe('qualified')
  await visit(page, `${site.name}-10-lead-edited`)
  await page.goto(`${site.url}/app/leads`)
  await page.getByRole('link', { name: 'Lead 2' }).click()
  await page.getByRole('link', { name: 'Delete this lead…' }).click()
  await page.getByRole('heading', { name: 'Delete the lead lead-2@example.com?' }).waitFor()
  await visit(page, `${site.name}-11-lead-delete-confirm`)
  await page.getByRole('button', { name: 'Delete lead' }).focus()
  await page.keyboard.press('Enter')
  await page.waitForURL(`${site.url}/app/leads?deleted=1`)
  await page.getByText('Lead deleted.').waitFor()
  await expect(page.locator('#lead-results tbody tr').count()).resolves.toBe(3)
  await expect(page.locator('#lead-results').textContent()).resolves.not.toContain('lead-2@example.com')

  // A second source, deleted after its confirmation page; the first one stays.
  await page.getByRole('link', { name: 'Sources' }).click()
  await page.getByLabel('New source name').fill('Old landing page')
  await page.getByRole('button', { name: 'Create source' }).click()
  await page.getByRole('heading', { name: 'Source created' }).waitFor()
  await page.getByRole('link', { name: 'Delete this source…' }).click()
  await page.getByRole('heading', { name: 'Delete Old landing page?' }).waitFor()
  await visit(page, `${site.name}-12-source-delete-confirm`)
  await page.getByRole('button', { name: 'Delete source' }).click()
  await page.waitForURL(`${site.url}/app/sources?deleted=1`)
  await page.getByText('Source deleted.').waitFor()
  await expect(page.locator('table').textContent()).resolves.not.toContain('Old landing page')
  await expect(page.locator('table').textContent()).resolves.toContain('Contact form')

  // A personal access token: created and shown once, works, revoked, stops.
  await page.getByRole('link', { name: 'Access tokens' }).click()
  await page.getByLabel('Name').fill('ci export')
  await page.getByLabel('leads.read', { exact: true }).check()
  await page.getByRole('button', { name: 'Create token' }).click()
  const token = await page.getByLabel('Token', { exact: true }).inputValue()
  const api = () => fetch(`${site.url}/api/v2/leads`, { headers: { authorization: `Bearer ${token}` } })
  expect((await api()).status).toBe(200)
  await visit(page, `${site.name}-13-token-created`)
  await page.getByRole('button', { name: 'Revoke ci export' }).click()
  await page.getByText('Token revoked.').waitFor()
  expect((await api()).status).toBe(401)

  // A viewer: added by the owner, signs in, sees leads read-only.
  await page.getByRole('link', { name: 'Members' }).click()
  const viewerEmail = `viewer-${crypto.randomUUID()}@example.com`
  await page.getByLabel('E-mail').fill(viewerEmail)
  await page.getByLabel('Initial password').fill(PASSWORD)
  await page.getByLabel('Role', { exact: true }).selectOption('viewer')
  await page.getByRole('button', { name: 'Add member' }).click()
  await page.getByText(`${viewerEmail} added.`).waitFor()
  // Another member: made admin, then removed after the confirmation page.
  const tempEmail = `temp-${crypto.randomUUID()}@example.com`
  await page.getByLabel('E-mail').fill(tempEmail)
  await page.getByLabel('Initial password').fill(PASSWORD)
  await page.getByLabel('Role', { exact: true }).selectOption('member')
  await page.getByRole('button', { name: 'Add member' }).click()
  await page.getByText(`${tempEmail} added.`).waitFor()
  const tempRow = page.getByRole('row').filter({ hasText: tempEmail })
  await page.getByLabel(`Role of ${tempEmail}`).selectOption('admin')
  await tempRow.getByRole('button', { name: 'Change role' }).click()
  await page.getByText(`${tempEmail} is now admin.`).waitFor()
  await visit(page, `${site.name}-14-members`)
  // The link's name carries the member's e-mail (visually hidden), so a list of links says whom it removes.
  const remove = tempRow.getByRole('link', { name: /^Remove/ })
  await expect(remove.evaluate((link) => link.textContent)).resolves.toContain(tempEmail)
  await remove.click()
  await page.getByRole('heading', { name: `Remove ${tempEmail}?` }).waitFor()
  await visit(page, `${site.name}-15-member-remove-confirm`)
  await page.getByRole('button', { name: 'Remove member' }).click()
  await page.getByText(`${tempEmail} removed.`).waitFor()
  await expect(page.locator('table').textContent()).resolves.not.toContain(tempEmail)
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.waitForURL(`${site.url}/app/sign-in`)
  await page.getByLabel('E-mail').fill(viewerEmail)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${site.url}/app/leads`)
  await expect(
    page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents(),
  ).resolves.toEqual(['Leads', 'Access tokens'])
  await expect(page.locator('#lead-results tbody tr').count()).resolves.toBe(3)
  await visit(page, `${site.name}-16-viewer-leads`)
  // The viewer's lead page: the fields as text, no form, no way to delete.
  await page.getByRole('link', { name: 'Lead 0 Lovelace' }).click()
  await page.getByRole('heading', { name: 'Lead 0 Lovelace' }).waitFor()
  await expect(page.getByRole('button', { name: 'Save lead' }).count()).resolves.toBe(0)
  await expect(page.getByRole('link', { name: 'Delete this lead…' }).count()).resolves.toBe(0)
  await expect(page.locator('main').textContent()).resolves.toContain('qualified')
  await visit(page, `${site.name}-17-viewer-lead`)
  const forbidden = await page.goto(`${site.origin}${sourcePath}`)
  expect(forbidden!.status()).toBe(403)
  await visit(page, `${site.name}-18-viewer-forbidden`)

  // A phone-sized screen: no horizontal scrolling of the page itself.
  await page.setViewportSize({ width: 375, height: 800 })
  await page.goto(`${site.url}/app/leads`)
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375)
  await shot(page, `${site.name}-19-viewer-phone`)

  expect(errors).toEqual([])
  // Browsers ask for /favicon.ico on their own; the only other failure is the viewer's 403.
  expect(failedLoads.filter((load) => !load.endsWith('/favicon.ico'))).toEqual([`403 ${sourcePath}`])
  await context.close()
}

describe('the dashboard journey', () => {
  test(
    'served at the root: sign-up → source → copy URL → leads and chart → logs and a failed body → new key → CSV → edit and delete a lead → delete a source → PAT → members (role, removal) → viewer',
    () => journey(direct),
    TIMEOUT_MS * 4,
  )

  test(
    `behind HAProxy under ${PROXY_PREFIX} (PUBLIC_BASE_URL with a path, the proxy stripping it): every link, form, redirect and cookie works`,
    () => journey(proxied),
    TIMEOUT_MS * 4,
  )

  test(
    'a cross-site form post is refused, and the page cannot read the cookie',
    async () => {
      const attacker = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: () =>
          new Response(
            `<!doctype html><html><body><form id="f" method="post" action="${base}/app/sources"><input name="name" value="Forged"><input name="_csrf" value="guess"></form><script>document.getElementById('f').submit()</script></body></html>`,
            { headers: { 'content-type': 'text/html' } },
          ),
      })
      try {
        const context = await browser.newContext()
        const page = await context.newPage()
        await page.goto(`${base}/app/sign-up`)
        await page.getByLabel('Organization name').fill('Victim Ltd')
        await page.getByLabel('E-mail').fill(`victim-${crypto.randomUUID()}@example.com`)
        await page.getByLabel('Password').fill(PASSWORD)
        await page.getByRole('button', { name: 'Create account' }).click()
        await page.waitForURL(`${base}/app/sources`)
        const forged = page.waitForResponse(
          (response) => response.url() === `${base}/app/sources` && response.request().method() === 'POST',
        )
        await page.goto(`http://127.0.0.1:${attacker.port}/`)
        const response = await forged
        // SameSite=Strict keeps the cookie off the cross-site post: the visitor is sent to sign in.
        expect([303, 403]).toContain(response.status())
        await page.goto(`${base}/app/sources`)
        expect(await page.content()).not.toContain('Forged')
        expect(await page.content()).toContain('No sources yet.')
        await shot(page, '20-after-cross-site-post')
        await context.close()
      } finally {
        attacker.stop(true)
      }
    },
    TIMEOUT_MS * 2,
  )
})

afterAll(async () => {
  await Bun.write(`${ARTIFACTS}axe-findings.json`, JSON.stringify(axeFindings, null, 2))
})
