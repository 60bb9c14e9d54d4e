import { Elysia, t } from 'elysia'
import { ErrorBody, managementErrors } from '../../lib/schemas'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import {
  AddMemberRequest,
  ChangeRoleRequest,
  Member,
  MemberList,
  MemberListQuery,
  MemberParams,
} from './model'
import type { MembersService } from './service'

const TAGS = ['Members']
// Members are not one of the spec's integration endpoints: they need the permission only, on every plan.
const REQUIRES = { permission: 'settings.members' } as const
/** The requirement of every members route, for the dashboard's pages. */
export const MEMBER_ACCESS = REQUIRES

/** Users of the caller's organization (DESIGN §4): `settings.members` (owners and admins). */
export function membersModule(service: MembersService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'members', prefix: '/api/v2/members' })
    .use(authPlugin)
    .get('', ({ principal, query }) => service.list(principal, query), {
      auth: REQUIRES,
      query: MemberListQuery,
      response: { 200: MemberList, ...managementErrors },
      detail: {
        operationId: 'listMembers',
        tags: TAGS,
        summary: 'List the members of your organization',
        description: 'Newest first; cursor pagination with `limit` (default 50, max 200) and `cursor`.',
      },
    })
    .post('', async ({ principal, body, status }) => status(201, await service.add(principal, body)), {
      auth: REQUIRES,
      body: AddMemberRequest,
      transform: rejectUnknownFields(AddMemberRequest),
      response: { 201: Member, ...managementErrors, 409: ErrorBody },
      detail: {
        operationId: 'addMember',
        tags: TAGS,
        summary: 'Add a member',
        description:
          'Creates a user in your organization with an initial password. Nobody grants a role above their own (403 `role_above_own`: an admin cannot add an owner), nor a role with a permission the credential lacks: a PAT counts with its scopes, so a PAT scoped to `settings.members` alone cannot add anyone (403 `role_above_own` with `missing_permissions`). 409 `email_taken` when the e-mail already has an account. The initial password follows the sign-up rules (8 to 128 Unicode code points, not only spaces, not a common password): 400 `validation_failed` with `details[].path` `/password` otherwise.',
      },
    })
    .patch(
      '/:user_id',
      ({ principal, params, body }) => service.changeRole(principal, params.user_id, body.role),
      {
        auth: REQUIRES,
        params: MemberParams,
        body: ChangeRoleRequest,
        transform: rejectUnknownFields(ChangeRoleRequest),
        response: { 200: Member, ...managementErrors, 404: ErrorBody, 409: ErrorBody },
        detail: {
          operationId: 'changeMemberRole',
          tags: TAGS,
          summary: 'Change the role of a member',
          description:
            'Applies to the member’s next request (permissions are computed per request). 403 `role_above_own` when the new role, or the member’s current role, is above yours or has a permission your credential lacks (a PAT counts with its scopes); 409 `last_owner` when it would leave the organization without an owner; 404 for a user of another organization.',
        },
      },
    )
    .delete(
      '/:user_id',
      async ({ principal, params, status }) => {
        await service.remove(principal, params.user_id)
        return status(204, undefined)
      },
      {
        auth: REQUIRES,
        params: MemberParams,
        response: { 204: t.Void(), ...managementErrors, 404: ErrorBody, 409: ErrorBody },
        detail: {
          operationId: 'removeMember',
          tags: TAGS,
          summary: 'Remove a member',
          description:
            'Deletes the user with their sessions and tokens: their access ends at once. 403 `role_above_own` for a member ranked above you or holding a permission your credential lacks; 409 `last_owner` for the only owner; 404 for a user of another organization.',
        },
      },
    )
}
