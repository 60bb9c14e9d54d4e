import type { PageSession } from '../session'
import { CsrfField, documentOf, Layout } from './layout'

/**
 * The confirmation step of a deletion: a page of its own rather than a script dialog, so it works
 * without JavaScript, by keyboard and with a screen reader, and a stray click on the list deletes
 * nothing. Only the POST from this page deletes.
 */
export function confirmPage(view: {
  session: PageSession
  title: string
  /** What will go, and what stays. */
  consequences: string
  /** Dashboard paths (`/app/…`): the page puts them under the session's base path. */
  action: string
  button: string
  cancelHref: string
  current?: string
}): string {
  return documentOf(
    <Layout title={view.title} session={view.session} current={view.current}>
      <h1 safe>{view.title}</h1>
      <p safe>{view.consequences}</p>
      <form method="post" action={`${view.session.basePath}${view.action}`} class="inline">
        <CsrfField token={view.session.csrfToken} />
        <button type="submit" class="danger" safe>
          {view.button}
        </button>{' '}
        <a href={`${view.session.basePath}${view.cancelHref}`}>Cancel</a>
      </form>
    </Layout>,
  )
}
