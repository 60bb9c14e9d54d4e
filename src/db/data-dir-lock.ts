import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs'
import { join } from 'node:path'

/**
 * PGlite is a database inside one process: two processes that open one DATA_DIR each write their
 * own copy, and one of them silently loses its writes. Whoever opens DATA_DIR first holds
 * `DATA_DIR/lead-capture.lock` (created with O_EXCL) holding its pid and its process start time;
 * a second process (the service or the CLI) stops with a message naming the holder.
 *
 * Staleness: a process killed with SIGKILL leaves the file behind. The lock counts as held only
 * while a process with that pid is alive (`kill(pid, 0)`) AND, where /proc exists, that process
 * started at the recorded time (field 22 of /proc/<pid>/stat), so a pid reused by an unrelated
 * process after a crash does not block start-up either. A stale file is removed and taken over.
 */
export const LOCK_FILE_NAME = 'lead-capture.lock'

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holderPid: number,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by process ${holderPid} (embedded PGlite allows one process at a time; ` +
        `a second one would write to a copy that is lost). Stop that process first (for the CLI: stop the ` +
        `service, run the command, start the service again), or set DATABASE_URL to use PostgreSQL, which ` +
        `any number of processes can share.`,
    )
    this.name = 'DataDirLockedError'
  }
}

interface LockContent {
  pid: number
  started: string | null
}

export interface DataDirLock {
  path: string
  release(): void
}

export function acquireDataDirLock(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE_NAME)
  const own: LockContent = { pid: process.pid, started: processStartTime(process.pid) }
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number
    try {
      fd = openSync(path, 'wx', 0o600)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const holder = readLock(path)
      if (holder && holder.pid !== process.pid && isAlive(holder)) {
        throw new DataDirLockedError(dataDir, holder.pid)
      }
      // Stale (the holder is gone) or unreadable (a crash between create and write): take over.
      rmSync(path, { force: true })
      continue
    }
    try {
      writeSync(fd, JSON.stringify(own))
    } finally {
      closeSync(fd)
    }
    return {
      path,
      release() {
        // Only our own file: never remove a lock another process took over meanwhile.
        if (readLock(path)?.pid === process.pid) rmSync(path, { force: true })
      },
    }
  }
  throw new Error(`could not take the lock ${path}`)
}

function readLock(path: string): LockContent | null {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockContent>
    if (typeof parsed.pid !== 'number' || !Number.isInteger(parsed.pid) || parsed.pid <= 0) return null
    return { pid: parsed.pid, started: typeof parsed.started === 'string' ? parsed.started : null }
  } catch {
    return null
  }
}

function isAlive(holder: LockContent): boolean {
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    // EPERM: alive, owned by another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  if (holder.started === null) return true
  const started = processStartTime(holder.pid)
  return started === null || started === holder.started
}

/** Start time of a process in clock ticks since boot (Linux /proc), or null where unknown. */
function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[19] ?? null
  } catch {
    return null
  }
}
