import type { LogLevelName } from '../config'
import { maskSecretsInText } from './secrets'

const LEVELS: Record<LogLevelName, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }

export type LogFields = Record<string, unknown>

export interface Logger {
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

export type LogSink = (line: string) => void

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
  return {
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
