import { SCOPES } from '../../../lib/permissions'
import type { PatSummaryView } from '../../pat/model'
import type { PageSession } from '../session'
import { CsrfField, documentOf, formatTime, Layout, Notice } from './layout'

export interface TokensView {
  session: PageSession
  tokens: PatSummaryView[]
  mayCreate: boolean
  created?: { token: string; name: string }
  error?: string | null
  revoked?: boolean
}

export function tokensPage(view: TokensView): string {
  const { session } = view
  const { basePath } = session
  return documentOf(
    <Layout title="Access tokens" session={session} current="/app/tokens">
      <h1>Personal access tokens</h1>
      <p>For server-side integrations. Never put a token in a web page.</p>
      <Notice kind="error" message={view.error} />
      <Notice kind="success" message={view.revoked ? 'Token revoked.' : null} />
      {view.created ? (
        <section class="key-once" aria-labelledby="token-once-title">
          <h2 id="token-once-title" safe>{`Token "${view.created.name}" created`}</h2>
          <p>This token is shown only now: copy it.</p>
          <label for="new-token">Token</label>
          <div class="copy-row">
            <input id="new-token" readonly value={view.created.token} />
            <button type="button" data-copy="new-token">
              Copy
            </button>
          </div>
          <p class="copy-status" role="status" aria-live="polite"></p>
        </section>
      ) : (
        ''
      )}
      {view.mayCreate ? (
        <form method="post" action={`${basePath}/app/tokens`} class="stack narrow">
          <CsrfField token={session.csrfToken} />
          <label for="token-name">Name</label>
          <input id="token-name" name="name" required maxlength="100" />
          <fieldset>
            <legend>Scopes (none: everything your role allows)</legend>
            {SCOPES.map((scope) => (
              <div class="check">
                <input id={`scope-${scope}`} name="scopes" type="checkbox" value={scope} />
                <label for={`scope-${scope}`}>{scope}</label>
              </div>
            ))}
          </fieldset>
          <label for="expires_in_days">Expires after (days, 1-365; empty: never)</label>
          <input
            id="expires_in_days"
            name="expires_in_days"
            inputmode="numeric"
            pattern="[0-9]{0,3}"
            size="3"
          />
          <button type="submit">Create token</button>
        </form>
      ) : (
        ''
      )}
      {view.tokens.length === 0 ? (
        <p>No tokens.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Your tokens</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Token</th>
                <th scope="col">Scopes</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {view.tokens.map((token) => (
                <tr>
                  <td safe>{token.name}</td>
                  <td>
                    <code safe>{token.masked_token}</code>
                  </td>
                  <td>{token.scopes.length ? token.scopes.join(', ') : 'all of your role'}</td>
                  <td safe>{formatTime(token.last_used_at)}</td>
                  <td>{token.expires_at ? formatTime(token.expires_at) : 'never'}</td>
                  <td>
                    <form method="post" action={`${basePath}/app/tokens/${token.token_id}/revoke`}>
                      <CsrfField token={session.csrfToken} />
                      <button type="submit" aria-label={`Revoke ${token.name}`}>
                        Revoke
                      </button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Layout>,
  )
}
