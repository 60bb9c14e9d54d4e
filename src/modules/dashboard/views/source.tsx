import type { LogEntry, SourceHealth } from '../../delivery-logs/model'
import type { SourceRecord, SourceWithKey } from '../../sources/model'
import { formatFieldMapping } from '../service'
import type { PageSession } from '../session'
import { CsrfField, documentOf, FormOutcome, formatRate, formatTime, Layout } from './layout'
import { KeyOnce, StatusBadge } from './sources'

export const CHART_OUTCOMES = ['created', 'updated', 'spam', 'error', 'rejected'] as const

export interface SourceView {
  session: PageSession
  source: SourceRecord
  health: SourceHealth | null
  publicBaseUrl: string
  mayManage: boolean
  mayRegenerate: boolean
  mayDelete: boolean
  newKey?: SourceWithKey
  newKeyHeadline?: string
  error?: string | null
  details?: Array<{ path: string; message: string }>
  saved?: boolean
}

/** Data for the chart script: hours (epoch seconds) and one series per outcome. */
export function chartData(health: SourceHealth) {
  return {
    hours: health.hourly.map((bucket) => Date.parse(bucket.from) / 1000),
    series: Object.fromEntries(
      CHART_OUTCOMES.map((outcome) => [outcome, health.hourly.map((bucket) => bucket[outcome])]),
    ),
  }
}

/** JSON inside a <script type="application/json">: `<` escaped so no text can close the element. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c')
}

export function sourcePage(view: SourceView): string {
  const { source, health, session } = view
  const { basePath } = session
  const logsHref = `${basePath}/app/sources/${source.id}/logs`
  const snippetUrl = view.newKey?.webhook_url ?? `${view.publicBaseUrl}/api/webhook/lead/<your key>`
  const snippet = `<script async src="${view.publicBaseUrl}/api/webhook/tracker.js" data-webhook-url="${snippetUrl}" data-forms="auto"></script>`
  const curl = `curl -X POST '${snippetUrl}' -H 'content-type: application/json' -d '{"email":"ada@example.com","first_name":"Ada"}'`
  return documentOf(
    <Layout title={source.name} session={session} current="/app/sources">
      <p class="crumbs">
        <a href={`${basePath}/app/sources`}>Sources</a>
      </p>
      <h1 safe>{source.name}</h1>
      <p>
        <StatusBadge status={health?.status ?? (source.enabled ? 'unknown' : 'disabled')} />{' '}
        <span safe>{`key …${source.key_hint}`}</span>
      </p>
      <FormOutcome error={view.error} details={view.details} done={view.saved ? 'Settings saved.' : null} />
      {view.newKey ? (
        <KeyOnce source={view.newKey} headline={view.newKeyHeadline ?? 'New webhook URL'} />
      ) : (
        ''
      )}
      {health ? <HealthSection health={health} logsHref={logsHref} /> : ''}
      <section aria-labelledby="install-title">
        <h2 id="install-title">Install</h2>
        <label for="snippet">Tracker snippet</label>
        <textarea id="snippet" readonly rows="3" safe>
          {snippet}
        </textarea>
        <label for="curl">curl example</label>
        <textarea id="curl" readonly rows="3" safe>
          {curl}
        </textarea>
      </section>
      {view.mayManage ? (
        <SettingsForm source={source} csrfToken={session.csrfToken} basePath={basePath} />
      ) : (
        ''
      )}
      {view.mayRegenerate ? (
        <section aria-labelledby="regenerate-title">
          <h2 id="regenerate-title">Regenerate the key</h2>
          <form method="post" action={`${basePath}/app/sources/${source.id}/regenerate-key`} class="inline">
            <CsrfField token={session.csrfToken} />
            <label for="grace_seconds">Old key keeps working for</label>
            <select id="grace_seconds" name="grace_seconds">
              <option value="0">no time: it stops now</option>
              <option value="3600">1 hour</option>
              <option value="86400">24 hours</option>
            </select>
            <button type="submit">Regenerate key</button>
          </form>
        </section>
      ) : (
        ''
      )}
      {view.mayDelete ? (
        <p>
          <a href={`${basePath}/app/sources/${source.id}/delete`} class="danger">
            Delete this source…
          </a>
        </p>
      ) : (
        ''
      )}
    </Layout>,
  )
}

/** `logsHref`: the source's logs page (under the base path), which each entry's page is below. */
function HealthSection(props: { health: SourceHealth; logsHref: string }): JSX.Element {
  const { health } = props
  return (
    <section aria-labelledby="health-title">
      <h2 id="health-title">Last 24 hours</h2>
      <dl class="figures">
        <div>
          <dt>Requests</dt>
          <dd>{health.totals.requests}</dd>
        </div>
        <div>
          <dt>Success rate</dt>
          <dd safe>{formatRate(health.success_rate)}</dd>
        </div>
        <div>
          <dt>Latency p50 / p95</dt>
          <dd safe>{`${health.latency_ms.p50 ?? '—'} / ${health.latency_ms.p95 ?? '—'} ms`}</dd>
        </div>
        <div>
          <dt>Last request</dt>
          <dd safe>{formatTime(health.last_request_at)}</dd>
        </div>
      </dl>
      <figure>
        <div
          id="hourly-chart"
          class="chart"
          data-chart="hourly-chart-data"
          role="img"
          aria-label="Requests per hour over the last 24 hours, stacked by outcome"
        ></div>
        <figcaption>Requests per hour by outcome (hover for values).</figcaption>
      </figure>
      <script type="application/json" id="hourly-chart-data">
        {scriptJson(chartData(health))}
      </script>
      <HourlyTable health={health} />
      <h3>Rejections by reason</h3>
      {health.rejections.length === 0 ? (
        <p>None.</p>
      ) : (
        <ul>
          {health.rejections.map((rejection) => (
            <li safe>{`${rejection.reason} (HTTP ${rejection.http_status}): ${rejection.count}`}</li>
          ))}
        </ul>
      )}
      <h3>Recent problems</h3>
      <ProblemList entries={health.recent_problems} logsHref={props.logsHref} />
      <p>
        <a href={props.logsHref}>All delivery logs</a>
      </p>
    </section>
  )
}

/** The chart's numbers as a table, for screen readers and without JavaScript. */
function HourlyTable(props: { health: SourceHealth }): JSX.Element {
  return (
    <details>
      <summary>Hourly numbers</summary>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Hour (UTC)</th>
              {CHART_OUTCOMES.map((outcome) => (
                <th scope="col">{outcome}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.health.hourly.map((bucket) => (
              <tr>
                <td safe>{formatTime(bucket.from)}</td>
                {CHART_OUTCOMES.map((outcome) => (
                  <td>{bucket[outcome]}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  )
}

export function ProblemList(props: { entries: LogEntry[]; logsHref: string }): JSX.Element {
  if (props.entries.length === 0) return <p>None.</p>
  return (
    <ul>
      {props.entries.map((entry) => (
        <li>
          <a href={`${props.logsHref}/${entry.id}`} safe>
            {`${formatTime(entry.received_at)} — ${entry.outcome}${entry.reason ? ` (${entry.reason})` : ''}, HTTP ${entry.http_status}`}
          </a>
        </li>
      ))}
    </ul>
  )
}

function SettingsForm(props: { source: SourceRecord; csrfToken: string; basePath: string }): JSX.Element {
  const { source, basePath } = props
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <form method="post" action={`${basePath}/app/sources/${source.id}`} class="stack">
        <CsrfField token={props.csrfToken} />
        <label for="name">Name</label>
        <input id="name" name="name" required maxlength="200" value={source.name} />
        <div class="check">
          <input id="enabled" name="enabled" type="checkbox" checked={source.enabled} />
          <label for="enabled">Enabled (a disabled source answers 404 on its URL)</label>
        </div>
        <div class="check">
          <input id="spam_filter" name="spam_filter" type="checkbox" checked={source.spam_filter} />
          <label for="spam_filter">Spam filter</label>
        </div>
        <label for="domain_allowlist">Allowed domains (one per line; empty: any)</label>
        <textarea id="domain_allowlist" name="domain_allowlist" rows="3" safe>
          {source.domain_allowlist.join('\n')}
        </textarea>
        <label for="ip_allowlist">Allowed IP addresses or ranges (one per line; empty: any)</label>
        <textarea id="ip_allowlist" name="ip_allowlist" rows="3" safe>
          {source.ip_allowlist.join('\n')}
        </textarea>
        <label for="field_mapping">Field mapping (one "form field = lead field" per line)</label>
        <textarea id="field_mapping" name="field_mapping" rows="3" safe>
          {formatFieldMapping(source.field_mapping)}
        </textarea>
        <label for="default_country">Default country (two letters, for phones without +prefix)</label>
        <input
          id="default_country"
          name="default_country"
          maxlength="2"
          size="2"
          value={source.default_country ?? ''}
        />
        <button type="submit">Save settings</button>
      </form>
    </section>
  )
}
