import type { PlanName } from '../config'
import type { AppContext } from '../context'
import { isUuid } from '../lib/ids'
import { cleanName } from '../lib/names'
import { planFeatures } from '../lib/permissions'
import { IdentityService } from '../modules/auth/service'
import { checkEmail, checkPassword, parseOptions, UsageError } from './args'
import type { CliCommand, CommandIo } from './commands'

const PLANS: readonly PlanName[] = ['free', 'pro', 'enterprise']

function isPlan(value: string): value is PlanName {
  return (PLANS as readonly string[]).includes(value)
}

const CREATE_USAGE =
  'usage: bun run cli orgs create --name <name> --owner-email <e-mail> --password <password>'
const SET_PLAN_USAGE = `usage: bun run cli orgs set-plan <organization id> <${PLANS.join('|')}>`

/** Prints `{"organization_id", "user_id", "plan"}`: the organization (DEFAULT_PLAN unless --plan) and its owner. */
async function create(ctx: AppContext, args: string[], io: CommandIo): Promise<number> {
  const { values } = parseOptions(args, ['name', 'owner-email', 'password', 'plan'], 0)
  const problems: string[] = []
  const name = cleanName(values.name ?? '') ?? ''
  if (!name) problems.push('--name is required (not only spaces)')
  if (name.length > 200) problems.push('--name must be at most 200 characters')
  const email = checkEmail(values['owner-email'], '--owner-email', problems)
  const password = await checkPassword(values.password, '--password', problems)
  const plan = values.plan ?? ctx.config.defaultPlan
  if (!isPlan(plan)) problems.push(`--plan must be one of ${PLANS.join(', ')}`)
  if (problems.length > 0 || !isPlan(plan)) throw new UsageError(problems)
  const { organization, user } = await new IdentityService(ctx).createOrganizationWithOwner({
    organizationName: name,
    email,
    password,
    plan,
  })
  io.stdout(
    `${JSON.stringify({ organization_id: organization.id, user_id: user.id, plan: organization.plan })}\n`,
  )
  return 0
}

/** Prints `{"organization_id", "plan", "features"}`. Takes effect on the organization's next request. */
async function setPlan(ctx: AppContext, args: string[], io: CommandIo): Promise<number> {
  const { positionals } = parseOptions(args, [], 2)
  const [id = '', plan = ''] = positionals
  const problems: string[] = []
  if (!isUuid(id)) problems.push(`"${id}" is not an organization id (UUID)`)
  if (!(PLANS as readonly string[]).includes(plan))
    problems.push(`plan must be one of ${PLANS.join(', ')}, not "${plan}"`)
  if (problems.length > 0) throw new UsageError(problems)
  const organization = await new IdentityService(ctx).setPlan(id.toLowerCase(), plan as PlanName)
  io.stdout(
    `${JSON.stringify({ organization_id: organization.id, plan: organization.plan, features: planFeatures(organization.plan) })}\n`,
  )
  return 0
}

export const orgsCreateCommand: CliCommand = {
  name: 'orgs create',
  usage: CREATE_USAGE,
  description: 'Create an organization (DEFAULT_PLAN unless --plan) with its owner; prints the ids as JSON',
  run: create,
}

export const orgsSetPlanCommand: CliCommand = {
  name: 'orgs set-plan',
  usage: SET_PLAN_USAGE,
  description: "Change an organization's plan (free has no integrations feature); prints the plan as JSON",
  run: setPlan,
}
