import { ConfigError, loadConfig } from '../config'
import { createLogger } from '../lib/logger'
import { openDatabase } from './client'
import { runMigrations } from './migrate'

// `bun run migrate`: apply migrations and exit (the Dockerfile runs this before the server).
try {
  const config = loadConfig()
  const logger = createLogger(config.logLevel)
  const database = await openDatabase(config)
  try {
    await runMigrations(config, database, logger)
  } finally {
    await database.close()
  }
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : error)
  process.exit(1)
}
