import { Webhook } from 'standardwebhooks'
import type { AppContext } from '../../context'
import { parseOutboundUrl, resolveOutboundTarget } from '../../lib/outbound-url'
import type { ClaimedDelivery, DeliveryQueueRepository, EndpointForDelivery } from './repository'

/**
 * A checked address is used for this long before the endpoint's host is resolved and checked again.
 * Every connection still goes to an address that passed the check (pinned), so a name that now
 * resolves to a private address is refused at the next check, within this time; what the cache
 * saves is a DNS lookup per delivery at high rates.
 */
export const TARGET_CHECK_TTL_MS = 30_000
// Endpoints are few per organization; this only bounds a replica serving very many of them.
const MAX_ENDPOINTS = 10_000

/** Where an attempt connects, worked out once per check. */
export interface CheckedTarget {
  /** The URL with its host replaced by the checked address (pinned: no second DNS answer). */
  pinnedUrl: string
  /** The Host header and the TLS server name keep the name. */
  host: string
  serverName: string
}

/** An endpoint as the worker sends to it: URL parsed, secrets opened once, signers ready. */
export interface DeliveryEndpoint {
  id: string
  version: string
  url: URL
  signer: Webhook
  /** The secret before the last rotation, signing alongside until `previousExpiresAt`. */
  previousSigner: Webhook | null
  previousExpiresAt: number | null
  failingSince: Date | null
  target?: { checked: CheckedTarget; until: number }
}

/**
 * The endpoints of the worker's deliveries, kept by the version of their row (`xmin`, which every
 * update changes: a URL change, a rotation, a disable, a failure streak starting or ending). A claim
 * returns each delivery's endpoint version; only endpoints whose version is new to this replica are
 * read and their secrets decrypted, in one statement per claim. Without it each delivery carried
 * the endpoint's URL and sealed secrets and decrypted them again.
 */
export class EndpointCache {
  private readonly byId = new Map<string, DeliveryEndpoint>()

  constructor(
    private readonly ctx: AppContext,
    private readonly queue: DeliveryQueueRepository,
  ) {}

  /** Makes sure every endpoint of `claimed` is held at (at least) the version claimed. */
  async load(claimed: ClaimedDelivery[]): Promise<void> {
    const stale = new Set<string>()
    for (const delivery of claimed) {
      if (this.byId.get(delivery.endpoint_id)?.version !== delivery.endpoint_version) {
        stale.add(delivery.endpoint_id)
      }
    }
    if (stale.size === 0) return
    if (this.byId.size + stale.size > MAX_ENDPOINTS) this.byId.clear()
    for (const row of await this.queue.endpoints([...stale])) {
      try {
        this.byId.set(row.id, this.open(row))
      } catch (error) {
        // A secret that does not open (another key): its deliveries wait for their lease, logged.
        this.byId.delete(row.id)
        this.ctx.logger.warn('webhook endpoint unusable: its secret does not open', {
          endpoint_id: row.id,
          error,
        })
      }
    }
  }

  get(id: string): DeliveryEndpoint | undefined {
    return this.byId.get(id)
  }

  /** Where to connect: the address checked within TARGET_CHECK_TTL_MS, else resolved and checked now. */
  async target(endpoint: DeliveryEndpoint): Promise<CheckedTarget> {
    const now = performance.now()
    if (endpoint.target && endpoint.target.until > now) return endpoint.target.checked
    const policy = { allowPrivateNetworks: this.ctx.config.outboundAllowPrivateNetworks }
    const { url, address } = await resolveOutboundTarget(
      parseOutboundUrl(endpoint.url.toString(), policy),
      policy,
    )
    const pinned = new URL(url.toString())
    pinned.hostname = address.includes(':') ? `[${address}]` : address
    const checked = {
      pinnedUrl: pinned.toString(),
      host: url.host,
      serverName: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    }
    endpoint.target = { checked, until: now + TARGET_CHECK_TTL_MS }
    return checked
  }

  private open(row: EndpointForDelivery): DeliveryEndpoint {
    const { secretBox } = this.ctx
    return {
      id: row.id,
      version: row.version,
      url: new URL(row.url),
      signer: new Webhook(secretBox.open(row.secret_ciphertext)),
      previousSigner:
        row.previous_secret_ciphertext && row.previous_secret_expires_at
          ? new Webhook(secretBox.open(row.previous_secret_ciphertext))
          : null,
      previousExpiresAt: row.previous_secret_expires_at
        ? new Date(row.previous_secret_expires_at).getTime()
        : null,
      failingSince: row.failing_since ? new Date(row.failing_since) : null,
    }
  }
}
