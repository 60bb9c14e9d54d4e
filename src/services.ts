import type { AppContext } from './context'
import { registerWriteBehindBuffers } from './jobs'
import { RequestRegistry } from './lib/http'
import { InputGuard } from './lib/input-guard'
import { checkRateLimit, type RateLimitCheck, type RateLimitRule } from './lib/rate-limit'
import { CredentialResolver } from './modules/auth/credentials'
import { IdentityService } from './modules/auth/service'
import { DashboardService } from './modules/dashboard/service'
import { DeliveryLogWriter } from './modules/delivery-logs/log-writer'
import { DeliveryLogsService } from './modules/delivery-logs/service'
import { GroupCommitWriter } from './modules/inbound/group-commit'
import { LastRequestRecorder } from './modules/inbound/last-request'
import { InboundPressure } from './modules/inbound/pressure'
import { RejectionAggregator } from './modules/inbound/rejection-aggregator'
import { InboundRepository } from './modules/inbound/repository'
import { InboundService } from './modules/inbound/service'
import type { LeadsRepository } from './modules/leads/repository'
import { LeadsService } from './modules/leads/service'
import { MembersService } from './modules/members/service'
import { PatService } from './modules/pat/service'
import { SourcesService } from './modules/sources/service'
import { SourceCache } from './modules/sources/source-cache'
import { WebhookEndpointsService } from './modules/webhook-endpoints/service'
import { DeliverySignal } from './modules/webhook-endpoints/signal'
import { DeliveryWorker } from './modules/webhook-endpoints/worker'

/**
 * Every service of one replica, built once and handed to what needs it: createApp's modules and
 * plugins, the background work of src/jobs.ts, and tests (makeTestApp returns them). The
 * dependencies between services are the constructor arguments below, nothing is looked up. One
 * set per context: two sets would mean two source caches, two delivery workers and two
 * write-behind buffers for one database.
 */
/**
 * Parts a caller supplies instead of the default ones: a test that observes a repository's calls
 * (test/integration/leads-export.test.ts counts the export's page reads) without reaching into a
 * service's private fields.
 */
export interface ServiceParts {
  leadsRepository?: LeadsRepository
  /** The lead path's pressure as both the group commit and the delivery worker see it. */
  inboundPressure?: InboundPressure
}

export function buildServices(ctx: AppContext, parts: ServiceParts = {}) {
  // Per-request state (request id, client IP, rate-limit headers) shared by the plugins and the
  // inbound route, which reads the client IP and records its own limit headers.
  const requests = new RequestRegistry(ctx.config.trustProxy)
  const inputGuard = new InputGuard()
  const credentials = new CredentialResolver(ctx)
  // One limiter call and its decision (headers, 429), for the management plugin and the inbound route.
  const checkLimit: RateLimitCheck = (rules: RateLimitRule[]) => checkRateLimit(ctx, rules)
  // In-process wake-ups of this replica's delivery worker by whoever queued an event.
  const deliverySignal = new DeliverySignal()
  // Inbound first (docs/webhooks.md): the group commit tells the delivery worker when leads wait
  // for connections, and the worker then defers lead events to a floor rate.
  const inboundPressure = parts.inboundPressure ?? new InboundPressure(ctx.clock)
  const sourceCache = new SourceCache(ctx)
  const identity = new IdentityService(ctx)
  const deliveryLogs = new DeliveryLogsService(ctx)
  const leads = new LeadsService(ctx, parts.leadsRepository)
  const pat = new PatService(ctx)
  const members = new MembersService(ctx, identity)
  const sources = new SourcesService(ctx, sourceCache)
  const webhookEndpoints = new WebhookEndpointsService(ctx, deliverySignal)
  // Delivery-log entries that store no lead (refusals, spam, counted floods).
  const deliveryLogWriter = new DeliveryLogWriter(ctx)
  // The inbound statements: the group commit's ingest_leads() and the count of preflights and GETs.
  const inboundRepository = new InboundRepository(ctx)
  const services = {
    requests,
    inputGuard,
    credentials,
    checkLimit,
    deliverySignal,
    inboundPressure,
    sourceCache,
    identity,
    deliveryLogs,
    leads,
    pat,
    members,
    sources,
    webhookEndpoints,
    deliveryWorker: new DeliveryWorker(ctx, {
      signal: deliverySignal,
      endpoints: webhookEndpoints,
      pressure: inboundPressure,
    }),
    inbound: new InboundService(ctx, {
      guard: inputGuard,
      registry: requests,
      sources: sourceCache,
      checkLimit,
      repository: inboundRepository,
      // Accepted leads, grouped into one ingest_leads() call; a group that queued webhook events
      // wakes this replica's delivery worker.
      writer: new GroupCommitWriter(ctx, inboundRepository, deliverySignal, inboundPressure),
      deliveryLogs: deliveryLogWriter,
      rejections: new RejectionAggregator(ctx, deliveryLogWriter),
      lastRequests: new LastRequestRecorder(ctx),
    }),
    dashboard: new DashboardService({ identity, deliveryLogs, leads, members, pat, sources }),
  }
  registerWriteBehindBuffers(ctx, services)
  return services
}

export type Services = ReturnType<typeof buildServices>
