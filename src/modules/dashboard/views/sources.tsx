import type { SourceHealth } from '../../delivery-logs/model'
import type { SourceRecord, SourceWithKey } from '../../sources/model'
import type { PageSession } from '../session'
import { CsrfField, documentOf, formatRate, formatTime, Layout, Notice } from './layout'

export function StatusBadge(props: { status: SourceHealth['status'] | 'unknown' }): JSX.Element {
  return <span class={`badge ${props.status}`}>{props.status}</span>
}

export interface SourcesView {
  session: PageSession
  summaries: Array<{ source: SourceRecord; health: SourceHealth | null }>
  nextCursor: string | null
  mayCreate: boolean
  error?: string | null
  deleted?: boolean
}

export function sourcesPage(view: SourcesView): string {
  const { basePath } = view.session
  const withHealth = view.summaries.some((summary) => summary.health !== null)
  return documentOf(
    <Layout title="Sources" session={view.session} current="/app/sources">
      <h1>Sources</h1>
      <Notice kind="error" message={view.error} />
      <Notice kind="success" message={view.deleted ? 'Source deleted.' : null} />
      {view.mayCreate ? (
        <form method="post" action={`${basePath}/app/sources`} class="inline">
          <CsrfField token={view.session.csrfToken} />
          <label for="new-source-name">New source name</label>
          <input id="new-source-name" name="name" required maxlength="200" />
          <button type="submit">Create source</button>
        </form>
      ) : (
        ''
      )}
      {view.summaries.length === 0 ? (
        <p>No sources yet.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Sources and their last 24 hours</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                {withHealth ? <th scope="col">Requests (24 h)</th> : ''}
                {withHealth ? <th scope="col">Success rate</th> : ''}
                <th scope="col">Last request</th>
              </tr>
            </thead>
            <tbody>
              {view.summaries.map(({ source, health }) => (
                <tr>
                  <td>
                    <a href={`${basePath}/app/sources/${source.id}`} safe>
                      {source.name}
                    </a>
                  </td>
                  <td>
                    <StatusBadge status={health?.status ?? (source.enabled ? 'unknown' : 'disabled')} />
                  </td>
                  {withHealth ? <td>{health?.totals.requests ?? 0}</td> : ''}
                  {withHealth ? <td safe>{formatRate(health?.success_rate)}</td> : ''}
                  <td safe>{formatTime(health?.last_request_at ?? source.last_request_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {view.nextCursor ? (
        <p>
          <a href={`${basePath}/app/sources?cursor=${encodeURIComponent(view.nextCursor)}`}>Older sources</a>
        </p>
      ) : (
        ''
      )}
    </Layout>,
  )
}

/** The new key's URL, shown once with a copy button (after creation and after regeneration). */
export function KeyOnce(props: { source: SourceWithKey; headline: string }): JSX.Element {
  return (
    <section class="key-once" aria-labelledby="key-once-title">
      <h2 id="key-once-title" safe>
        {props.headline}
      </h2>
      <p>This URL is shown only now: copy it into your form. Only its last four characters are kept.</p>
      <label for="webhook-url">Webhook URL</label>
      <div class="copy-row">
        <input id="webhook-url" readonly value={props.source.webhook_url} />
        <button type="button" data-copy="webhook-url">
          Copy
        </button>
      </div>
      <p class="copy-status" role="status" aria-live="polite"></p>
    </section>
  )
}
