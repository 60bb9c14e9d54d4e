import { sql } from 'drizzle-orm'
import { index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid, varchar } from 'drizzle-orm/pg-core'
import { organizations } from './organizations'
import { webhookSources } from './webhook-sources'

export const leads = pgTable(
  'leads',
  {
    id: uuid('id').primaryKey(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    sourceId: uuid('source_id').references(() => webhookSources.id, { onDelete: 'set null' }),
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
