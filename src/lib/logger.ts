import type { LogLevelName } from '../config'
import { maskSecretsInText } from './secrets'

const LEVELS: Record<LogLevelName, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }

export type LogFields = Record<string, unknown>

/** The one line written per HTTP request. */
export interface AccessLogEntry {
  requestId: string
  method: string
  path: string
  status: number
  durationMs: number
  clientIp: string
}

export interface Logger {
  /** The per-request line: same JSON shape as the others, formatted without a generic stringify. */
  access(entry: AccessLogEntry): void
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

export type LogSink = (line: string) => void

/**
 * Standard output, written in batches: lines are joined and written once per event-loop turn
 * (or at 64 KB) instead of one write per line. Under load that turns thousands of small writes a
 * second into a few; the buffer is flushed before the process exits.
 */
export function bufferedStdoutSink(): LogSink {
  let buffer: string[] = []
  let size = 0
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (buffer.length === 0) return
    const chunk = buffer.join('')
    buffer = []
    size = 0
    process.stdout.write(chunk)
  }
  process.on('exit', flush)
  return (line) => {
    buffer.push(line)
    size += line.length
    if (size >= 65_536) flush()
    else if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }
}

/**
 * One JSON object per line on stdout. Every line passes through the secret masker, so a key that
 * reaches a message by accident is still never written in full.
 */
export function createLogger(
  level: LogLevelName,
  sink: LogSink = (line) => process.stdout.write(line),
): Logger {
  const threshold = LEVELS[level]
  const write = (name: Exclude<LogLevelName, 'silent'>, message: string, fields?: LogFields) => {
    if (LEVELS[name] < threshold) return
    const entry = { level: name, time: new Date().toISOString(), msg: message, ...fields }
    sink(`${maskSecretsInText(JSON.stringify(entry, errorReplacer))}\n`)
  }
  const accessEnabled = LEVELS.info >= threshold
  // The access line's time, formatted once per millisecond: under load a replica writes ten or more
  // lines in the same millisecond.
  let formattedAt = Number.NaN
  let formatted = ''
  const now = () => {
    const at = Date.now()
    if (at !== formattedAt) {
      formattedAt = at
      formatted = new Date(at).toISOString()
    }
    return formatted
  }
  return {
    // On the hot path: only the path and the client-chosen request id can carry a secret, so only
    // they go through the masker.
    access: (entry) => {
      if (!accessEnabled) return
      sink(
        `{"level":"info","time":"${now()}","msg":"request","request_id":${JSON.stringify(maskSecretsInText(entry.requestId))},"method":${JSON.stringify(entry.method)},"path":${JSON.stringify(maskSecretsInText(entry.path))},"status":${entry.status},"duration_ms":${entry.durationMs},"client_ip":${JSON.stringify(entry.clientIp)}}\n`,
      )
    },
    debug: (message, fields) => write('debug', message, fields),
    info: (message, fields) => write('info', message, fields),
    warn: (message, fields) => write('warn', message, fields),
    error: (message, fields) => write('error', message, fields),
  }
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code
    return { name: value.name, message: value.message, code, stack: value.stack }
  }
  return value
}

/** A logger that keeps lines in memory: tests read what would have been logged. */
export function createMemoryLogger(level: LogLevelName = 'debug'): Logger & { lines: LogFields[] } {
  const lines: LogFields[] = []
  const logger = createLogger(level, (line) => lines.push(JSON.parse(line)))
  return Object.assign(logger, { lines })
}
