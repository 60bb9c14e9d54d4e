import { boolean, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core'
import { organizations } from './organizations'

export const webhookSources = pgTable(
  'webhook_sources',
  {
    id: uuid('id').primaryKey(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    enabled: boolean('enabled').notNull().default(true),
    keyDigest: text('key_digest').notNull(),
    keyHint: text('key_hint').notNull(),
    // After a regeneration with a grace window the old key keeps working until this time.
    previousKeyDigest: text('previous_key_digest'),
    previousKeyExpiresAt: timestamp('previous_key_expires_at', { withTimezone: true, mode: 'date' }),
    ipAllowlist: jsonb('ip_allowlist').$type<string[]>().notNull().default([]),
    domainAllowlist: jsonb('domain_allowlist').$type<string[]>().notNull().default([]),
    fieldMapping: jsonb('field_mapping').$type<Record<string, string>>().notNull().default({}),
    defaultCountry: text('default_country'),
    spamFilter: boolean('spam_filter').notNull().default(true),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    keyRotatedAt: timestamp('key_rotated_at', { withTimezone: true, mode: 'date' }),
    lastRequestAt: timestamp('last_request_at', { withTimezone: true, mode: 'date' }),
    // The health status last announced by a `source.status_changed` webhook event (null: none yet).
    announcedHealthStatus: text('announced_health_status'),
  },
  (table) => [
    uniqueIndex('webhook_sources_key_digest_unique').on(table.keyDigest),
    index('webhook_sources_previous_key_digest_idx').on(table.previousKeyDigest),
    index('webhook_sources_organization_idx').on(table.organizationId, table.id),
  ],
)
