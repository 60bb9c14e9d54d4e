import type { LeadList } from '../../leads/model'
import type { LeadsPageQuery } from '../model'
import type { PageSession } from '../session'
import { documentOf, formatTime, Layout, Notice } from './layout'

function queryString(query: LeadsPageQuery, cursor?: string | null): string {
  const params = new URLSearchParams()
  if (query.q) params.set('q', query.q)
  if (query.source_id) params.set('source_id', query.source_id)
  if (cursor) params.set('cursor', cursor)
  const text = params.toString()
  return text ? `?${text}` : ''
}

export function leadsPage(view: { session: PageSession; list: LeadList; query: LeadsPageQuery }): string {
  const { basePath } = view.session
  const next = view.list.next_cursor
    ? `${basePath}/app/leads${queryString(view.query, view.list.next_cursor)}`
    : null
  return documentOf(
    <Layout title="Leads" session={view.session} current="/app/leads">
      <h1>Leads</h1>
      <Notice kind="success" message={view.query.deleted ? 'Lead deleted.' : null} />
      <search>
        <form
          method="get"
          action={`${basePath}/app/leads`}
          class="filters"
          hx-get={`${basePath}/app/leads`}
          hx-target="#lead-results"
          hx-select="#lead-results"
          hx-swap="outerHTML"
          hx-push-url="true"
        >
          <label for="q">Search e-mail or phone</label>
          <input id="q" name="q" type="search" value={view.query.q} />
          {view.query.source_id ? <input type="hidden" name="source_id" value={view.query.source_id} /> : ''}
          <button type="submit">Search</button>
        </form>
      </search>
      <div id="lead-results">
        <p>
          <a href={`${basePath}/app/leads/export.csv${queryString(view.query)}`} download="">
            Export these leads as CSV
          </a>
        </p>
        {view.list.data.length === 0 ? (
          <p>No leads match.</p>
        ) : (
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Leads, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Received</th>
                  <th scope="col">Name</th>
                  <th scope="col">E-mail</th>
                  <th scope="col">Phone</th>
                  <th scope="col">Status</th>
                </tr>
              </thead>
              <tbody>
                {view.list.data.map((lead) => (
                  <tr>
                    <td safe>{formatTime(lead.created_at)}</td>
                    <td>
                      {/* The link to the lead's page (edit, delete) needs a name even for a lead without one. */}
                      <a href={`${basePath}/app/leads/${lead.lead_id}`} safe>
                        {[lead.first_name, lead.last_name].filter(Boolean).join(' ') || '(no name)'}
                      </a>
                    </td>
                    <td safe>{lead.email ?? ''}</td>
                    <td safe>{lead.phone_raw ?? ''}</td>
                    <td safe>{lead.status ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {next ? (
          <p>
            <a
              href={next}
              hx-get={next}
              hx-target="#lead-results"
              hx-select="#lead-results"
              hx-swap="outerHTML"
              hx-push-url="true"
            >
              Older leads
            </a>
          </p>
        ) : (
          ''
        )}
      </div>
    </Layout>,
  )
}
