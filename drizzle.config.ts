import { defineConfig } from 'drizzle-kit'

// Migrations are generated offline from the schema; no database connection is needed.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema/index.ts',
  out: './drizzle',
  casing: 'snake_case',
})
