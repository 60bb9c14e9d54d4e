import type { LogEntry, LogEntryWithBody, LogPage } from '../../delivery-logs/model'
import { OUTCOMES } from '../../delivery-logs/model'
import type { SourceRecord } from '../../sources/model'
import type { LogsPageQuery } from '../model'
import type { PageSession } from '../session'
import { documentOf, formatTime, Layout } from './layout'

export interface LogsView {
  session: PageSession
  source: SourceRecord
  page: LogPage
  query: LogsPageQuery
}

function queryString(query: LogsPageQuery, cursor?: string | null): string {
  const params = new URLSearchParams()
  for (const key of ['outcome', 'status', 'since', 'until'] as const) {
    const value = query[key]
    if (value) params.set(key, value)
  }
  if (cursor) params.set('cursor', cursor)
  const text = params.toString()
  return text ? `?${text}` : ''
}

export function logsPage(view: LogsView): string {
  const { basePath } = view.session
  const base = `${basePath}/app/sources/${view.source.id}/logs`
  return documentOf(
    <Layout title={`Logs · ${view.source.name}`} session={view.session} current="/app/sources">
      <p class="crumbs">
        <a href={`${basePath}/app/sources`}>Sources</a> ›{' '}
        <a href={`${basePath}/app/sources/${view.source.id}`} safe>
          {view.source.name}
        </a>
      </p>
      <h1>Delivery logs</h1>
      <form
        method="get"
        action={base}
        class="filters"
        hx-get={base}
        hx-target="#log-results"
        hx-select="#log-results"
        hx-swap="outerHTML"
        hx-push-url="true"
      >
        <label for="outcome">Outcome</label>
        <select id="outcome" name="outcome">
          <option value="">any</option>
          {OUTCOMES.map((outcome) => (
            <option value={outcome} selected={view.query.outcome === outcome}>
              {outcome}
            </option>
          ))}
        </select>
        <label for="status">HTTP status</label>
        <input
          id="status"
          name="status"
          inputmode="numeric"
          pattern="[1-5][0-9][0-9]"
          size="3"
          value={view.query.status}
        />
        <label for="since">Since (UTC)</label>
        <input id="since" name="since" type="datetime-local" value={view.query.since} />
        <label for="until">Until (UTC)</label>
        <input id="until" name="until" type="datetime-local" value={view.query.until} />
        <button type="submit">Filter</button>
      </form>
      <LogResults
        entries={view.page.data}
        nextHref={view.page.next_cursor ? `${base}${queryString(view.query, view.page.next_cursor)}` : null}
        entriesHref={base}
      />
    </Layout>,
  )
}

/** `entriesHref`: the logs page's URL (under the base path), which each entry's page is below. */
function LogResults(props: {
  entries: LogEntry[]
  nextHref: string | null
  entriesHref: string
}): JSX.Element {
  return (
    <div id="log-results">
      {props.entries.length === 0 ? (
        <p>No entries match.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Delivery-log entries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Received</th>
                <th scope="col">Outcome</th>
                <th scope="col">HTTP</th>
                <th scope="col">Reason</th>
                <th scope="col">Origin</th>
                <th scope="col">Time</th>
              </tr>
            </thead>
            <tbody>
              {props.entries.map((entry) => (
                <tr>
                  <td>
                    <a href={`${props.entriesHref}/${entry.id}`} safe>
                      {formatTime(entry.received_at)}
                    </a>
                  </td>
                  <td>
                    <span class={`badge ${entry.outcome}`}>{entry.outcome}</span>
                  </td>
                  <td>{entry.http_status}</td>
                  <td
                    safe
                  >{`${entry.reason ?? ''}${entry.repeat_count > 1 ? ` ×${entry.repeat_count}` : ''}`}</td>
                  <td safe>{entry.origin ?? ''}</td>
                  <td safe>{`${entry.duration_ms} ms`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {props.nextHref ? (
        <p>
          <a
            href={props.nextHref}
            hx-get={props.nextHref}
            hx-target="#log-results"
            hx-select="#log-results"
            hx-swap="outerHTML"
            hx-push-url="true"
          >
            Older entries
          </a>
        </p>
      ) : (
        ''
      )}
    </div>
  )
}

export function logEntryPage(view: {
  session: PageSession
  source: SourceRecord
  entry: LogEntryWithBody
}): string {
  const { entry, source } = view
  const { basePath } = view.session
  const body =
    entry.body === null
      ? '(no body stored)'
      : typeof entry.body === 'string'
        ? entry.body
        : JSON.stringify(entry.body, null, 2)
  return documentOf(
    <Layout title="Delivery-log entry" session={view.session} current="/app/sources">
      <p class="crumbs">
        <a href={`${basePath}/app/sources`}>Sources</a> ›{' '}
        <a href={`${basePath}/app/sources/${source.id}`} safe>
          {source.name}
        </a>{' '}
        › <a href={`${basePath}/app/sources/${source.id}/logs`}>Logs</a>
      </p>
      <h1 safe>{`${entry.outcome} — HTTP ${entry.http_status}`}</h1>
      <dl class="entry">
        <Field name="Received" value={formatTime(entry.received_at)} />
        <Field name="Reason" value={entry.reason ?? '—'} />
        <Field name="Lead" value={entry.lead_id ?? '—'} />
        <Field name="Client IP" value={entry.client_ip ?? '—'} />
        <Field name="Origin" value={entry.origin ?? '—'} />
        <Field name="User agent" value={entry.user_agent ?? '—'} />
        <Field name="Spam reasons" value={entry.spam_reasons.join(', ') || '—'} />
        <Field
          name="Body size"
          value={`${entry.body_bytes} bytes${entry.body_truncated ? ' (stored cut at 8 KB)' : ''}`}
        />
      </dl>
      <h2>Body</h2>
      <section aria-label="Request body">
        <pre class="body" safe>
          {body}
        </pre>
      </section>
    </Layout>,
  )
}

function Field(props: { name: string; value: string }): JSX.Element {
  return (
    <div>
      <dt safe>{props.name}</dt>
      <dd safe>{props.value}</dd>
    </div>
  )
}
