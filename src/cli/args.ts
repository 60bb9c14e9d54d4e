import { parseArgs } from 'node:util'
import { Value } from '@sinclair/typebox/value'
import { passwordProblem } from '../lib/passwords'
import { Email } from '../modules/auth/model'

/** A wrong invocation: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'))
    this.name = 'UsageError'
  }
}

/** Strict `--name value` options and positionals; anything unknown is a usage error. */
export function parseOptions<Name extends string>(
  args: string[],
  names: readonly Name[],
  positionals: number,
): { values: Partial<Record<Name, string>>; positionals: string[] } {
  try {
    const parsed = parseArgs({
      args,
      options: Object.fromEntries(names.map((name) => [name, { type: 'string' as const }])),
      strict: true,
      allowPositionals: positionals > 0,
    })
    if (parsed.positionals.length !== positionals) {
      throw new UsageError([
        `expected ${positionals} argument${positionals === 1 ? '' : 's'}, got ${parsed.positionals.length}`,
      ])
    }
    return { values: parsed.values as Partial<Record<Name, string>>, positionals: parsed.positionals }
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw new UsageError([(error as Error).message])
  }
}

/** The same rules as the API (model schemas), so the CLI cannot create what sign-up would refuse. */
export function checkEmail(value: string | undefined, flag: string, problems: string[]): string {
  if (!value) problems.push(`${flag} is required`)
  else if (!Value.Check(Email, value.trim())) problems.push(`${flag} must be an e-mail address`)
  return value?.trim() ?? ''
}

/** The password rules of lib/passwords.ts (those of sign-up and of members added by others). */
export async function checkPassword(
  value: string | undefined,
  flag: string,
  problems: string[],
): Promise<string> {
  if (!value) problems.push(`${flag} is required`)
  else {
    const problem = await passwordProblem(value)
    if (problem) problems.push(`${flag} ${problem}`)
  }
  return value ?? ''
}
