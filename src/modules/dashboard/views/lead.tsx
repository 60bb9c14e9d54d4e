import type { Lead } from '../../leads/model'
import type { PageSession } from '../session'
import { CsrfField, documentOf, FormOutcome, formatTime, Layout } from './layout'

export interface LeadView {
  session: PageSession
  lead: Lead
  mayEdit: boolean
  mayDelete: boolean
  saved?: boolean
  error?: string | null
  details?: Array<{ path: string; message: string }>
}

/** One lead: what was captured, the edit form (`leads.write`) and the way to delete it (`leads.delete`). */
export function leadPage(view: LeadView): string {
  const { lead, session } = view
  const { basePath } = session
  const name =
    [lead.first_name, lead.last_name].filter(Boolean).join(' ') || lead.email || lead.phone_raw || 'Lead'
  return documentOf(
    <Layout title={name} session={session} current="/app/leads">
      <p class="crumbs">
        <a href={`${basePath}/app/leads`}>Leads</a>
      </p>
      <h1 safe>{name}</h1>
      <FormOutcome error={view.error} details={view.details} done={view.saved ? 'Lead saved.' : null} />
      <dl class="entry">
        <Fact term="Received" value={formatTime(lead.created_at)} />
        <Fact term="Updated" value={formatTime(lead.updated_at)} />
        <Fact term="Source" value={lead.source_id} />
        <Fact term="Phone (E.164)" value={lead.phone_e164} />
        <Fact term="Attribution" value={JSON.stringify(lead.attribution)} />
      </dl>
      {view.mayEdit ? (
        <LeadForm lead={lead} csrfToken={session.csrfToken} basePath={basePath} />
      ) : (
        <dl class="entry">
          <Fact term="E-mail" value={lead.email} />
          <Fact term="Phone" value={lead.phone_raw} />
          <Fact term="Status" value={lead.status} />
          <Fact term="Custom fields" value={JSON.stringify(lead.custom_fields)} />
        </dl>
      )}
      {view.mayDelete ? (
        <p>
          <a href={`${basePath}/app/leads/${lead.lead_id}/delete`} class="danger">
            Delete this lead…
          </a>
        </p>
      ) : (
        ''
      )}
    </Layout>,
  )
}

function Fact(props: { term: string; value: string | null }): JSX.Element {
  return (
    <div>
      <dt safe>{props.term}</dt>
      <dd safe>{props.value ?? '—'}</dd>
    </div>
  )
}

function LeadForm(props: { lead: Lead; csrfToken: string; basePath: string }): JSX.Element {
  const { lead, basePath } = props
  return (
    <section aria-labelledby="edit-title">
      <h2 id="edit-title">Edit</h2>
      <form method="post" action={`${basePath}/app/leads/${lead.lead_id}`} class="stack narrow">
        <CsrfField token={props.csrfToken} />
        <label for="first_name">First name</label>
        <input id="first_name" name="first_name" maxlength="200" value={lead.first_name ?? ''} />
        <label for="last_name">Last name</label>
        <input id="last_name" name="last_name" maxlength="200" value={lead.last_name ?? ''} />
        <label for="email">E-mail</label>
        <input id="email" name="email" type="email" maxlength="320" value={lead.email ?? ''} />
        <label for="phone_raw">Phone</label>
        <input id="phone_raw" name="phone_raw" type="tel" maxlength="50" value={lead.phone_raw ?? ''} />
        <label for="status">Status</label>
        <input id="status" name="status" maxlength="50" value={lead.status ?? ''} />
        <label for="custom_fields">Custom fields (a JSON object; replaced as a whole)</label>
        <textarea id="custom_fields" name="custom_fields" rows="4" safe>
          {JSON.stringify(lead.custom_fields, null, 2)}
        </textarea>
        <button type="submit">Save lead</button>
      </form>
    </section>
  )
}
