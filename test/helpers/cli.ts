import type { CommandIo } from '../../src/cli/commands'
import { runCli } from '../../src/cli/index'
import type { AppContext } from '../../src/context'

/** A CommandIo that keeps what a command wrote, stdout and stderr apart. */
export function captureIo(): { io: CommandIo; out: { stdout: string; stderr: string } } {
  const out = { stdout: '', stderr: '' }
  const io: CommandIo = {
    stdout: (text) => {
      out.stdout += text
    },
    stderr: (text) => {
      out.stderr += text
    },
  }
  return { io, out }
}

/** `bun run cli <argv…>` in this process, on the test's context: its exit code and what it wrote. */
export async function cliInProcess(ctx: AppContext, ...argv: string[]) {
  const { io, out } = captureIo()
  const code = await runCli(argv, { ctx, io })
  return { code, ...out }
}
