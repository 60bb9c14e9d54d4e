import type { AppContext } from '../context'
import { isUuid } from '../lib/ids'
import { isRole, ROLES } from '../lib/permissions'
import { IdentityService } from '../modules/auth/service'
import { checkEmail, checkPassword, parseOptions, UsageError } from './args'
import type { CliCommand, CommandIo } from './commands'

const USAGE = `usage: bun run cli users create --org <organization id> --email <e-mail> --password <password> --role <${ROLES.join('|')}>`

/** Prints `{"user_id", "organization_id", "email", "role"}`. */
async function create(ctx: AppContext, args: string[], io: CommandIo): Promise<number> {
  const { values } = parseOptions(args, ['org', 'email', 'password', 'role'], 0)
  const problems: string[] = []
  const org = values.org?.trim() ?? ''
  if (!isUuid(org)) problems.push('--org must be an organization id (UUID)')
  const email = checkEmail(values.email, '--email', problems)
  const password = await checkPassword(values.password, '--password', problems)
  const role = values.role?.trim() ?? ''
  if (!isRole(role)) problems.push(`--role must be one of ${ROLES.join(', ')}`)
  if (problems.length > 0 || !isRole(role)) throw new UsageError(problems)
  const user = await new IdentityService(ctx).createUser({
    organizationId: org.toLowerCase(),
    email,
    password,
    role,
  })
  io.stdout(
    `${JSON.stringify({ user_id: user.id, organization_id: user.organizationId, email: user.email, role: user.role })}\n`,
  )
  return 0
}

export const usersCreateCommand: CliCommand = {
  name: 'users create',
  usage: USAGE,
  description: 'Create a user with a role in an existing organization; prints the user as JSON',
  run: create,
}
