import type { AppContext } from '../../src/context'
import { SESSION_COOKIE } from '../../src/modules/auth/credentials'
import { createSession } from './factories'
import type { makeTestApp } from './test-app'

type TestApp = Awaited<ReturnType<typeof makeTestApp>>['app']

export const SITE = 'http://localhost'

/** The value of `name="_csrf"` in a page: what the dashboard's forms send back. */
export function csrfTokenIn(html: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(html)
  if (!match) throw new Error('the page has no CSRF field')
  return match[1]!
}

/**
 * A browser-like client for `app.handle`: keeps the cookies the app sets (name=value only, as a
 * browser sends them), sends the page's Origin on forms, reads CSRF tokens from pages.
 */
export class DashboardClient {
  readonly cookies = new Map<string, string>()

  constructor(readonly app: TestApp) {}

  /** A client already signed in with a fresh session of the user (no sign-in form). */
  static async signedIn(app: TestApp, ctx: AppContext, userId: string) {
    const client = new DashboardClient(app)
    client.cookies.set(SESSION_COOKIE, await createSession(ctx, userId))
    return client
  }

  cookieHeader(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ')
  }

  async send(
    method: string,
    path: string,
    options: { form?: Record<string, string | string[]>; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { ...options.headers }
    if (this.cookies.size > 0) headers.cookie = this.cookieHeader()
    let body: string | undefined
    if (options.form) {
      const params = new URLSearchParams()
      for (const [name, value] of Object.entries(options.form)) {
        for (const item of Array.isArray(value) ? value : [value]) params.append(name, item)
      }
      body = params.toString()
      headers['content-type'] = 'application/x-www-form-urlencoded'
    }
    const response = await this.app.handle(new Request(`${SITE}${path}`, { method, headers, body }))
    const setCookie = response.headers.get('set-cookie')
    if (setCookie) {
      const [pair, ...attributes] = setCookie.split(';')
      const [name, value] = [pair!.slice(0, pair!.indexOf('=')), pair!.slice(pair!.indexOf('=') + 1)]
      const maxAge = attributes.find((attribute) => attribute.trim().toLowerCase().startsWith('max-age='))
      if (value === '' || maxAge?.trim() === 'Max-Age=0') this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
    return response
  }

  get(path: string) {
    return this.send('GET', path)
  }

  /** GETs the page the form is on, then posts the form with that page's CSRF token and Origin. */
  async submit(pagePath: string, action: string, form: Record<string, string | string[]> = {}) {
    const page = await this.get(pagePath)
    const token = csrfTokenIn(await page.text())
    return this.send('POST', action, { form: { _csrf: token, ...form }, headers: { origin: SITE } })
  }
}
