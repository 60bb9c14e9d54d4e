import { index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core'
import { organizations } from './organizations'
import { users } from './users'

export const personalAccessTokens = pgTable(
  'personal_access_tokens',
  {
    id: uuid('id').primaryKey(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    tokenDigest: text('token_digest').notNull(),
    // First and last four characters of the random body, for masked listings.
    tokenFirst4: text('token_first4').notNull(),
    tokenLast4: text('token_last4').notNull(),
    scopes: jsonb('scopes').$type<string[]>().notNull().default([]),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
    // When the `pat.expiring` webhook event was written for this token (once per token).
    expiryNoticeAt: timestamp('expiry_notice_at', { withTimezone: true, mode: 'date' }),
  },
  (table) => [
    uniqueIndex('personal_access_tokens_digest_unique').on(table.tokenDigest),
    index('personal_access_tokens_user_idx').on(table.userId),
  ],
)
