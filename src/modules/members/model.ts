import { t } from 'elysia'
import { ListPage, ListQueryFields, ResourceId } from '../../lib/schemas'
import { Email, Password, RoleName } from '../auth/model'

const MEMBER_EXAMPLE = {
  user_id: '0198f3a2-7c1e-7b3a-9d2e-1f4a5b6c7d8e',
  email: 'grace@example.com',
  role: 'member',
  created_at: '2026-01-01T09:30:00.000Z',
  updated_at: '2026-01-02T11:00:00.000Z',
}

export const Member = t.Object(
  {
    user_id: t.String({ format: 'uuid' }),
    email: t.String({ examples: ['grace@example.com'] }),
    role: RoleName,
    created_at: t.String({ format: 'date-time' }),
    updated_at: t.String({ format: 'date-time' }),
  },
  { title: 'Member', examples: [MEMBER_EXAMPLE] },
)

export const MemberList = ListPage(Member, {
  title: 'MemberPage',
  examples: [{ data: [MEMBER_EXAMPLE], next_cursor: null }],
})

export const MemberListQuery = t.Object(ListQueryFields)

export const AddMemberRequest = t.Object(
  { email: Email, password: Password, role: RoleName },
  {
    title: 'AddMemberRequest',
    additionalProperties: false,
    examples: [{ email: 'grace@example.com', password: 'a long initial password', role: 'member' }],
  },
)

export const ChangeRoleRequest = t.Object(
  { role: RoleName },
  {
    title: 'ChangeRoleRequest',
    additionalProperties: false,
    examples: [{ role: 'admin' }],
  },
)

export const MemberParams = t.Object({
  user_id: ResourceId('the member’s `user_id`'),
})

export type MemberView = typeof Member.static
export type AddMemberInput = typeof AddMemberRequest.static
export type MemberListQueryInput = typeof MemberListQuery.static
