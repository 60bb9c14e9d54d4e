import type { AppContext } from '../../src/context'
import {
  leads,
  organizations,
  personalAccessTokens,
  sessions,
  users,
  webhookSources,
} from '../../src/db/schema'
import { newId } from '../../src/lib/ids'
import type { Role } from '../../src/lib/permissions'
import { digestSecret, generateSecret, secretHints } from '../../src/lib/secrets'
import type { NormalizedLead } from '../../src/modules/inbound/normalize'
import type { CreateEndpointBody } from '../../src/modules/webhook-endpoints/model'
import type { Services } from '../../src/services'

/**
 * Rows inserted directly, for tests that need an organization, a signed-in user or a source without
 * going through the API that creates them. Every call makes fresh ids and e-mails.
 */
export async function createOrganization(ctx: AppContext, options: { plan?: string; name?: string } = {}) {
  const [organization] = await ctx.db
    .insert(organizations)
    .values({ id: newId(), name: options.name ?? `Org ${newId().slice(-6)}`, plan: options.plan ?? 'pro' })
    .returning()
  return organization!
}

export async function createUser(
  ctx: AppContext,
  organizationId: string,
  options: { role?: Role; email?: string; password?: string } = {},
) {
  const password = options.password ?? 'correct horse battery staple'
  const [user] = await ctx.db
    .insert(users)
    .values({
      id: newId(),
      organizationId,
      email: options.email ?? `user-${newId()}@example.com`,
      // Cheap hash: tests create many users; production uses the argon2id default.
      passwordHash: await Bun.password.hash(password, { algorithm: 'bcrypt', cost: 4 }),
      role: options.role ?? 'owner',
    })
    .returning()
  return { ...user!, password }
}

/** A session token for the user, valid from the context clock's now. */
export async function createSession(ctx: AppContext, userId: string) {
  const token = generateSecret('session')
  const now = ctx.clock.now()
  await ctx.db.insert(sessions).values({
    id: newId(),
    userId,
    tokenDigest: digestSecret(token),
    createdAt: new Date(now),
    lastUsedAt: new Date(now),
    expiresAt: new Date(now + 30 * 24 * 3600 * 1000),
  })
  return token
}

export async function createPat(
  ctx: AppContext,
  user: { id: string; organizationId: string },
  options: { scopes?: string[]; expiresAt?: Date | null; name?: string } = {},
) {
  const token = generateSecret('pat')
  const hints = secretHints(token)
  const [row] = await ctx.db
    .insert(personalAccessTokens)
    .values({
      id: newId(),
      userId: user.id,
      organizationId: user.organizationId,
      name: options.name ?? 'test token',
      tokenDigest: digestSecret(token),
      tokenFirst4: hints.first4,
      tokenLast4: hints.last4,
      scopes: options.scopes ?? [],
      createdAt: new Date(ctx.clock.now()),
      expiresAt: options.expiresAt ?? null,
    })
    .returning()
  return { token, tokenId: row!.id }
}

/** An organization (plan `pro` unless told) with one user of the role and a session token. */
export async function createSignedInUser(ctx: AppContext, options: { role?: Role; plan?: string } = {}) {
  const organization = await createOrganization(ctx, { plan: options.plan })
  const user = await createUser(ctx, organization.id, { role: options.role ?? 'owner' })
  const token = await createSession(ctx, user.id)
  return { organization, user, token }
}

export async function createSource(
  ctx: AppContext,
  organizationId: string,
  options: Partial<{
    name: string
    enabled: boolean
    ipAllowlist: string[]
    domainAllowlist: string[]
    fieldMapping: Record<string, string>
    defaultCountry: string | null
    spamFilter: boolean
  }> = {},
) {
  const apiKey = generateSecret('source_key')
  const [source] = await ctx.db
    .insert(webhookSources)
    .values({
      id: newId(),
      organizationId,
      name: options.name ?? 'Test source',
      enabled: options.enabled ?? true,
      keyDigest: digestSecret(apiKey),
      keyHint: apiKey.slice(-4),
      ipAllowlist: options.ipAllowlist ?? [],
      domainAllowlist: options.domainAllowlist ?? [],
      fieldMapping: options.fieldMapping ?? {},
      defaultCountry: options.defaultCountry ?? null,
      spamFilter: options.spamFilter ?? true,
    })
    .returning()
  return { source: source!, apiKey }
}

/**
 * A lead inserted directly (the inbound path is tested on its own). E-mail and phone dedup keys are
 * taken as given, so tests can set up exactly the rows they need.
 */
export async function createLead(
  ctx: AppContext,
  organizationId: string,
  options: Partial<Omit<NormalizedLead, 'signals'> & { sourceId: string | null; createdAt: Date }> = {},
) {
  const email = options.email === undefined ? `lead-${newId()}@example.com` : options.email
  const createdAt = options.createdAt ?? new Date(ctx.clock.now())
  const [lead] = await ctx.db
    .insert(leads)
    .values({
      id: newId(),
      organizationId,
      sourceId: options.sourceId ?? null,
      firstName: options.firstName ?? null,
      lastName: options.lastName ?? null,
      email,
      emailNormalized:
        options.emailNormalized === undefined
          ? (email?.trim().toLowerCase() ?? null)
          : options.emailNormalized,
      phoneRaw: options.phoneRaw ?? null,
      phoneE164: options.phoneE164 ?? null,
      status: options.status ?? null,
      customFields: options.customFields ?? {},
      attribution: options.attribution ?? {},
      createdAt,
      updatedAt: createdAt,
    })
    .returning()
  return lead!
}

/** A webhook endpoint made through the service (URL checks included), with its plain secret. */
export async function createWebhookEndpoint(
  services: Pick<Services, 'webhookEndpoints'>,
  organizationId: string,
  body: Partial<CreateEndpointBody> = {},
) {
  const created = await services.webhookEndpoints.create(organizationId, {
    // The discard port: nothing answers, and tests that deliver pass their receiver's URL.
    url: 'http://127.0.0.1:9/lead-capture',
    ...body,
  })
  return created
}
