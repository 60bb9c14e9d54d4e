import { ROLE_RANK, ROLES, type Role } from '../../../lib/permissions'
import type { MemberView } from '../../members/model'
import type { PageSession } from '../session'
import { CsrfField, documentOf, formatTime, Layout, Notice } from './layout'

export function membersPage(view: {
  session: PageSession
  members: MemberView[]
  error?: string | null
  /** What the last action did, said above the table. */
  done?: string | null
}): string {
  const { session } = view
  const { basePath } = session
  // Nobody grants a role above their own (the service refuses it too).
  const grantable = ROLES.filter((role) => ROLE_RANK[role] <= ROLE_RANK[session.principal.role])
  return documentOf(
    <Layout title="Members" session={session} current="/app/members">
      <h1>Members</h1>
      <Notice kind="error" message={view.error} />
      <Notice kind="success" message={view.done} />
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">Members of the organization</caption>
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">Since</th>
              <th scope="col">Change</th>
            </tr>
          </thead>
          <tbody>
            {view.members.map((member) => (
              <tr>
                <td safe>{member.email}</td>
                <td>{member.role}</td>
                <td safe>{formatTime(member.created_at)}</td>
                <td>
                  {/* Nobody changes someone ranked above them (the service refuses it too). */}
                  {ROLE_RANK[member.role] <= ROLE_RANK[session.principal.role] ? (
                    <MemberControls
                      member={member}
                      grantable={grantable}
                      csrfToken={session.csrfToken}
                      basePath={basePath}
                    />
                  ) : (
                    ''
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <h2>Add a member</h2>
      <form method="post" action={`${basePath}/app/members`} class="stack narrow">
        <CsrfField token={session.csrfToken} />
        <label for="member-email">E-mail</label>
        <input id="member-email" name="email" type="email" required autocomplete="off" />
        <label for="member-password">Initial password</label>
        <input
          id="member-password"
          name="password"
          type="password"
          required
          minlength="8"
          autocomplete="new-password"
        />
        <label for="member-role">Role</label>
        <select id="member-role" name="role">
          {grantable.map((role) => (
            <option value={role} selected={role === 'member'}>
              {role}
            </option>
          ))}
        </select>
        <button type="submit">Add member</button>
      </form>
    </Layout>,
  )
}

function MemberControls(props: {
  member: MemberView
  grantable: Role[]
  csrfToken: string
  basePath: string
}): JSX.Element {
  const { member, basePath } = props
  const field = `role-${member.user_id}`
  return (
    <div class="inline">
      <form method="post" action={`${basePath}/app/members/${member.user_id}/role`} class="inline">
        <CsrfField token={props.csrfToken} />
        <label for={field} class="visually-hidden" safe>
          {`Role of ${member.email}`}
        </label>
        <select id={field} name="role">
          {props.grantable.map((role) => (
            <option value={role} selected={role === member.role}>
              {role}
            </option>
          ))}
        </select>
        <button type="submit">Change role</button>
      </form>
      <a href={`${basePath}/app/members/${member.user_id}/remove`} class="danger">
        Remove<span class="visually-hidden" safe>{` ${member.email}`}</span>…
      </a>
    </div>
  )
}
