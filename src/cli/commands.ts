import type { AppContext } from '../context'
import { orgsCreateCommand, orgsSetPlanCommand } from './orgs'
import { sourcesCreateCommand } from './sources'
import { usersCreateCommand } from './users'
import { webhooksResealCommand } from './webhooks'

/** Where a command writes: stdout carries only the result (so scripts can pipe it), stderr the rest. */
export interface CommandIo {
  stdout(text: string): void
  stderr(text: string): void
}

/**
 * One CLI command. `name` is the words that select it (`orgs create`); `run` gets the arguments
 * after those words and a context whose migrations have been applied, and returns the exit code:
 * 0 ok, 1 runtime failure, 2 usage error. `--help` is answered from `usage` and `description`
 * without opening the database.
 */
export interface CliCommand {
  name: string
  usage: string
  description: string
  run(ctx: AppContext, args: string[], io: CommandIo): Promise<number>
}

/**
 * The registry `bun run cli` dispatches on. A command lives in its own file (src/cli/<topic>.ts)
 * and exports its CliCommand; add it here to make it reachable.
 */
export const commands: CliCommand[] = [
  orgsCreateCommand,
  orgsSetPlanCommand,
  usersCreateCommand,
  sourcesCreateCommand,
  webhooksResealCommand,
]
