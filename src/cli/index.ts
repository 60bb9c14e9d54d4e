import { ConfigError, loadConfig } from '../config'
import { type AppContext, createContext } from '../context'
import { runMigrations } from '../db/migrate'
import { AppError } from '../lib/errors'
import { createLogger } from '../lib/logger'
import { MemoryRateLimiter } from '../lib/rate-limit'
import { UsageError } from './args'
import { type CliCommand, type CommandIo, commands as registry } from './commands'

/**
 * `bun run cli <topic> <action> [options]`. Dispatches on the leading words of the arguments to a
 * command of the registry (src/cli/commands.ts), builds its own context (config → database →
 * migrations) and returns the exit code: 0 ok, 1 runtime failure, 2 usage error.
 */
/**
 * The process's own output, written in order through Bun.write, whose promise says when the text has
 * left the process. process.stdout.write to a pipe whose reader is slow only queues the text (and
 * Bun reports nothing queued), so process.exit dropped the rest: `sources create --count 20000 |
 * (sleep 2; wc -l)` printed a few thousand of its 20,000 lines.
 */
class ProcessOutput implements CommandIo {
  private written: Promise<unknown> = Promise.resolve()
  readonly stdout = (text: string) => this.write(Bun.stdout, text)
  readonly stderr = (text: string) => this.write(Bun.stderr, text)

  /** Resolves once everything written so far is out. */
  flushed(): Promise<unknown> {
    return this.written
  }

  private write(sink: typeof Bun.stdout, text: string): void {
    this.written = this.written.then(() => Bun.write(sink, text))
  }
}

export const processIo = new ProcessOutput()

const HELP_FLAGS = new Set(['--help', '-h', 'help'])

function overview(commands: readonly CliCommand[], topic?: string): string {
  const shown = topic ? commands.filter((command) => command.name.split(' ')[0] === topic) : commands
  const width = Math.max(...shown.map((command) => command.name.length))
  return [
    `usage: bun run cli ${topic ?? '<command>'} ${topic ? '<action>' : ''} [options]`
      .replace(/\s+/g, ' ')
      .trim(),
    '',
    'commands:',
    ...shown.map((command) => `  ${command.name.padEnd(width)}  ${command.description}`),
    '',
    `\`bun run cli ${topic ? `${topic} <action>` : '<command>'} --help\` shows the options of one command.`,
    '',
  ].join('\n')
}

/** The command whose name is the longest run of leading words of argv. */
function findCommand(commands: readonly CliCommand[], argv: string[]) {
  let found: { command: CliCommand; rest: string[] } | undefined
  for (const command of commands) {
    const words = command.name.split(' ')
    const matches = words.every((word, index) => argv[index] === word)
    if (matches && (!found || words.length > found.command.name.split(' ').length)) {
      found = { command, rest: argv.slice(words.length) }
    }
  }
  return found
}

export interface RunCliOptions {
  io?: CommandIo
  /** An existing context (tests): used as is, without migrations, and not closed. */
  ctx?: AppContext
  commands?: readonly CliCommand[]
  environment?: Record<string, string | undefined>
}

export async function runCli(argv: string[], options: RunCliOptions = {}): Promise<number> {
  const io = options.io ?? processIo
  const commands = options.commands ?? registry
  if (argv.length === 0 || HELP_FLAGS.has(argv[0]!)) {
    ;(argv.length === 0 ? io.stderr : io.stdout)(overview(commands))
    return argv.length === 0 ? 2 : 0
  }
  const found = findCommand(commands, argv)
  if (!found) {
    const topic = argv[0]!
    const known = commands.some((command) => command.name.split(' ')[0] === topic)
    if (known && (argv.length === 1 || HELP_FLAGS.has(argv[1]!))) {
      ;(argv.length === 1 ? io.stderr : io.stdout)(overview(commands, topic))
      return argv.length === 1 ? 2 : 0
    }
    io.stderr(
      `unknown command: ${argv.slice(0, known ? 2 : 1).join(' ')}\n\n${overview(commands, known ? topic : undefined)}`,
    )
    return 2
  }
  const { command, rest } = found
  if (rest.some((arg) => HELP_FLAGS.has(arg))) {
    io.stdout(`${command.description}\n\n${command.usage}\n`)
    return 0
  }

  let ctx = options.ctx
  try {
    if (!ctx) {
      const config = loadConfig(options.environment)
      // Logs go to stderr: stdout carries only the command's result. Start-up chatter stays quiet
      // unless LOG_LEVEL=debug.
      const logger = createLogger(config.logLevel === 'debug' ? 'debug' : 'warn', (line) => io.stderr(line))
      // The CLI sends no rate-limited traffic: no reason to connect to Redis.
      ctx = await createContext(config, { logger, limiter: new MemoryRateLimiter() })
      await runMigrations(config, ctx.database, logger)
    }
    return await command.run(ctx, rest, io)
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`${error.problems.join('\n')}\n${command.usage}\n`)
      return 2
    }
    if (error instanceof ConfigError) io.stderr(`${error.message}\n`)
    else if (error instanceof AppError) io.stderr(`error: ${error.message} (${error.code})\n`)
    else io.stderr(`error: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  } finally {
    if (ctx && !options.ctx) await ctx.close()
  }
}

if (import.meta.main) {
  const code = await runCli(process.argv.slice(2))
  await processIo.flushed()
  process.exit(code)
}
