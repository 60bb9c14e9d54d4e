import { t } from 'elysia'
import { ListQueryFields, NextCursor } from '../../lib/schemas'
import { Email, Password, RoleName } from '../auth/model'

export const Member = t.Object({
  user_id: t.String({ format: 'uuid' }),
  email: t.String({ examples: ['grace@example.com'] }),
  role: RoleName,
  created_at: t.String({ format: 'date-time' }),
  updated_at: t.String({ format: 'date-time' }),
})

export const MemberList = t.Object({ data: t.Array(Member), next_cursor: NextCursor })

export const MemberListQuery = t.Object(ListQueryFields)

export const AddMemberRequest = t.Object(
  { email: Email, password: Password, role: RoleName },
  { additionalProperties: false },
)

export const ChangeRoleRequest = t.Object({ role: RoleName }, { additionalProperties: false })

export const MemberParams = t.Object({
  user_id: t.String({ format: 'uuid', description: 'the member’s `user_id`' }),
})

export type MemberView = typeof Member.static
export type AddMemberInput = typeof AddMemberRequest.static
export type MemberListQueryInput = typeof MemberListQuery.static
