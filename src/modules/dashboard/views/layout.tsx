import type { PropsWithChildren } from '@kitajs/html'
import { isDashboardPath, requestPath } from '../../../lib/http'
import { allows } from '../../../plugins/auth'
import type { Principal } from '../../auth/credentials'
import { NAVIGATION } from '../access'
import type { PageSession } from '../session'

/** Kita renders synchronously when no component is async; every view here is synchronous. */
export function render(element: JSX.Element): string {
  if (typeof element !== 'string') throw new Error('dashboard views must render synchronously')
  return element
}

export function documentOf(element: JSX.Element): string {
  return `<!doctype html>${render(element)}`
}

/**
 * Who a page is for: a signed-in session (which carries the base path), or, before sign-in and on
 * the errors plugin's pages, the base path alone (config.publicBasePath).
 */
export type PageFrame = { session: PageSession } | { session?: undefined; basePath: string }

/**
 * The page around every view. `basePath` (config.publicBasePath, also on a session) starts every URL
 * the page hands the browser: the views write `${basePath}/app/…`, never a bare `/app/…`
 * (test/integration/dashboard-base-path.test.ts walks every page for one).
 */
export function Layout(
  props: PropsWithChildren<{ title: string; current?: string } & PageFrame>,
): JSX.Element {
  const { session } = props
  const basePath = session ? session.basePath : props.basePath
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        {/* htmx adds a <style> for its indicators unless told not to: the CSP allows no inline style. */}
        <meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false}' />
        <title safe>{`${props.title} · Lead Capture`}</title>
        <link rel="stylesheet" href={`${basePath}/app/assets/uPlot.min.css`} />
        <link rel="stylesheet" href={`${basePath}/app/assets/dashboard.css`} />
        <script src={`${basePath}/app/assets/htmx.min.js`} defer></script>
        <script src={`${basePath}/app/assets/uPlot.iife.min.js`} defer></script>
        <script src={`${basePath}/app/assets/dashboard.js`} defer></script>
      </head>
      <body hx-headers={session ? JSON.stringify({ 'x-csrf-token': session.csrfToken }) : undefined}>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href={`${basePath}/app`}>
            Lead Capture
          </a>
          {session ? (
            <Navigation principal={session.principal} current={props.current} basePath={basePath} />
          ) : (
            ''
          )}
          {session ? (
            <form method="post" action={`${basePath}/app/sign-out`} class="sign-out">
              <CsrfField token={session.csrfToken} />
              <span class="who" safe>
                {`${session.principal.email} (${session.principal.role})`}
              </span>
              <button type="submit">Sign out</button>
            </form>
          ) : (
            ''
          )}
        </header>
        <main id="main" tabindex="-1">
          {props.children}
        </main>
      </body>
    </html>
  )
}

function Navigation(props: { principal: Principal; current?: string; basePath: string }): JSX.Element {
  const items = NAVIGATION.filter((item) => allows(props.principal, item.requires))
  return (
    <nav aria-label="Main">
      <ul>
        {items.map((item) => (
          <li>
            <a
              href={`${props.basePath}${item.href}`}
              aria-current={props.current === item.href ? 'page' : undefined}
              safe
            >
              {item.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  )
}

export function CsrfField(props: { token: string }): JSX.Element {
  return <input type="hidden" name="_csrf" value={props.token} />
}

/** A message above a form: what went wrong (role=alert) or what was done (role=status). */
export function Notice(props: { kind: 'error' | 'success'; message?: string | null }): JSX.Element {
  if (!props.message) return ''
  return (
    <p class={`notice ${props.kind}`} role={props.kind === 'error' ? 'alert' : 'status'} safe>
      {props.message}
    </p>
  )
}

/** What a form's POST did: its error with the fields the API's validation named, or what was done. */
export function FormOutcome(props: {
  error?: string | null
  details?: Array<{ path: string; message: string }>
  done?: string | null
}): JSX.Element {
  return (
    <>
      <Notice kind="error" message={props.error} />
      {props.details?.length ? (
        <ul class="details">
          {props.details.map((detail) => (
            <li safe>{`${detail.path}: ${detail.message}`}</li>
          ))}
        </ul>
      ) : (
        ''
      )}
      <Notice kind="success" message={props.done} />
    </>
  )
}

const ERROR_TITLES: Record<number, string> = {
  400: 'That did not work',
  403: 'Not allowed',
  404: 'Not found',
  405: 'Not allowed here',
  409: 'Conflict',
  422: 'That did not work',
}

export function renderErrorPage(status: number, message: string, frame: PageFrame): string {
  const title = ERROR_TITLES[status] ?? 'Something went wrong'
  const basePath = frame.session ? frame.session.basePath : frame.basePath
  return documentOf(
    <Layout title={title} {...frame}>
      <h1 safe>{title}</h1>
      <p class="notice error" role="alert" safe>
        {message}
      </p>
      <p>
        <a href={`${basePath}/app`}>Back to the dashboard</a>
      </p>
    </Layout>,
  )
}

/**
 * The errors plugin's page for the dashboard's paths (a URL that matches no page, a malformed
 * query, a database outage): the same page as the handlers' own errors, without the session.
 */
export function dashboardErrorPages(basePath: string) {
  return (request: Request, status: number, message: string): string | null =>
    isDashboardPath(requestPath(request)) ? renderErrorPage(status, message, { basePath }) : null
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—'
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`
}

export function formatRate(rate: number | null | undefined): string {
  return rate === null || rate === undefined ? '—' : `${(rate * 100).toFixed(1)}%`
}
