import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { errors } from './errors'
import { type Cidr, ipInRanges, parseCidrList, parseIp } from './ip'

/**
 * Outbound requests to URLs that customers choose (webhook endpoints) must not reach the service's
 * own network (SSRF): loopback, private, carrier-grade NAT, link-local (cloud metadata at
 * 169.254.169.254 and fd00:ec2::254 among them), multicast, reserved and documentation ranges.
 */
const BLOCKED_RANGES: readonly Cidr[] = parseCidrList([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  '::1/128',
  '100::/64',
  '2001:db8::/32',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
])

/** IPv6 ranges that carry an IPv4 address in their last 32 bits: the IPv4 address decides. */
const IPV4_CARRYING_RANGES: readonly Cidr[] = parseCidrList([
  '::ffff:0:0/96', // IPv4-mapped
  '::/96', // IPv4-compatible (deprecated)
  '64:ff9b::/96', // NAT64
  '64:ff9b:1::/48', // local-use NAT64
])

/** Whether an address may be the target of an outbound request. */
export function isPublicAddress(address: string): boolean {
  const parsed = parseIp(address)
  if (!parsed) return false
  if (parsed.version === 6 && ipInRanges(address, IPV4_CARRYING_RANGES)) {
    const v4 = parsed.value & 0xffffffffn
    const dotted = [24n, 16n, 8n, 0n].map((shift) => String((v4 >> shift) & 0xffn)).join('.')
    return isPublicAddress(dotted)
  }
  return !ipInRanges(address, BLOCKED_RANGES)
}

export interface OutboundPolicy {
  /** OUTBOUND_ALLOW_PRIVATE_NETWORKS: plain http and private addresses are allowed. */
  allowPrivateNetworks: boolean
}

/** Where a request will really go: the URL as given and the address checked for it. */
export interface ResolvedTarget {
  url: URL
  /** The checked address to connect to (pinned, so a second DNS answer cannot swap it). */
  address: string
}

/** Syntax and scheme: what can be checked without DNS. Throws a 400 `validation_failed` on `path`. */
export function parseOutboundUrl(text: string, policy: OutboundPolicy, path = '/url'): URL {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw refused(path, 'is not an absolute URL')
  }
  if (url.protocol !== 'https:' && !(policy.allowPrivateNetworks && url.protocol === 'http:')) {
    throw refused(path, 'must use https')
  }
  if (url.username || url.password) throw refused(path, 'must not carry credentials')
  return url
}

/**
 * Resolves the host and checks every address it resolves to (a name with one private address among
 * public ones is refused: the connection could go to either). Checked at creation and again before
 * every attempt, against DNS rebinding; the attempt then connects to the address checked here.
 */
export async function resolveOutboundTarget(
  url: URL,
  policy: OutboundPolicy,
  path = '/url',
): Promise<ResolvedTarget> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  let addresses: string[]
  if (isIP(host)) addresses = [host]
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)
    } catch {
      throw refused(path, `the host "${host}" does not resolve`)
    }
  }
  if (addresses.length === 0) throw refused(path, `the host "${host}" does not resolve`)
  if (!policy.allowPrivateNetworks) {
    const blocked = addresses.find((address) => !isPublicAddress(address))
    if (blocked) {
      throw refused(
        path,
        `resolves to ${blocked}, a loopback, private, link-local, multicast or reserved address`,
      )
    }
  }
  // IPv4 first: a replica without IPv6 egress would otherwise fail on every dual-stack receiver.
  return { url, address: addresses.find((address) => isIP(address) === 4) ?? addresses[0]! }
}

function refused(path: string, message: string) {
  return errors.validation(`the URL ${message}`, [{ path, message }])
}
