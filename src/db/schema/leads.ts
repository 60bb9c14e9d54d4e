import { sql } from 'drizzle-orm'
import { index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid, varchar } from 'drizzle-orm/pg-core'

export const leads = pgTable(
  'leads',
  {
    id: uuid('id').primaryKey(),
    // No foreign keys on the two tables every lead writes to: four referential checks per lead
    // (one SPI query and row lock each) were a quarter of PostgreSQL's ingest cost. The same rules
    // hold by other means (drizzle/functions/): ingest_leads() and log_deliveries() lock the source
    // (shared advisory lock) and skip an item whose source is gone; a deleted source sets its
    // leads' source_id to NULL and deletes its delivery logs by trigger; a deleted organization
    // deletes its leads by trigger (its sources, and so their logs, go by their own foreign key).
    organizationId: uuid('organization_id').notNull(),
    sourceId: uuid('source_id'),
    firstName: text('first_name'),
    lastName: text('last_name'),
    email: text('email'),
    // trim + lower-case: the dedup key for e-mail
    emailNormalized: text('email_normalized'),
    phoneRaw: text('phone_raw'),
    // E.164: the dedup key for phone
    phoneE164: text('phone_e164'),
    status: varchar('status', { length: 50 }),
    customFields: jsonb('custom_fields').$type<Record<string, unknown>>().notNull().default({}),
    attribution: jsonb('attribution').$type<Record<string, unknown>>().notNull().default({}),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (table) => [
    // One lead per e-mail in an organization; the phone index is not unique because a lead matched
    // by e-mail may carry a phone another lead already has (DESIGN §7: e-mail first, then phone).
    uniqueIndex('leads_org_email_unique')
      .on(table.organizationId, table.emailNormalized)
      .where(sql`${table.emailNormalized} is not null`),
    // Ends in id so "oldest lead with this phone" (ORDER BY id LIMIT 1) is the index's first entry:
    // no plan can prefer walking (organization_id, id) and filtering on the phone instead.
    index('leads_org_phone_id_idx')
      .on(table.organizationId, table.phoneE164, table.id)
      .where(sql`${table.phoneE164} is not null`),
    index('leads_org_created_idx').on(table.organizationId, table.id),
    index('leads_source_idx').on(table.sourceId, table.id),
  ],
)
