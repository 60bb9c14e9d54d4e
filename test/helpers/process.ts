/** What a finished process left: its exit code and both outputs. */
export interface Finished {
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs `argv` to its end with `env` as its whole environment (entries left undefined are dropped)
 * and returns its exit code and outputs; both pipes are drained together so neither can fill up.
 */
export async function runToEnd(
  argv: string[],
  options: { env: Record<string, string | undefined>; cwd?: string },
): Promise<Finished> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(options.env)) if (value !== undefined) env[name] = value
  const child = Bun.spawn(argv, { cwd: options.cwd, env, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ])
  return { code, stdout, stderr }
}
