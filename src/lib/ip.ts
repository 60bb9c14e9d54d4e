import { isIP } from 'node:net'

/** An address range as a (version, network, prefix) triple; a single address is a /32 or /128. */
export interface Cidr {
  version: 4 | 6
  network: bigint
  prefix: number
}

export function parseIp(text: string): { version: 4 | 6; value: bigint } | null {
  const address = unmapIpv4(text.trim())
  const version = isIP(address)
  if (version === 4) {
    let value = 0n
    for (const part of address.split('.')) value = (value << 8n) | BigInt(Number(part))
    return { version: 4, value }
  }
  if (version === 6) {
    const withoutZone = address.split('%')[0] ?? address
    let groups: string[]
    // An embedded dotted IPv4 tail (::ffff:1.2.3.4 style) becomes two hex groups.
    const tail = withoutZone.match(/(\d+\.\d+\.\d+\.\d+)$/)
    let text6 = withoutZone
    if (tail?.[1]) {
      const v4 = parseIp(tail[1])!.value
      text6 =
        withoutZone.slice(0, -tail[1].length) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
    }
    const [head = '', rest] = text6.split('::')
    if (rest === undefined) groups = head.split(':')
    else {
      const left = head ? head.split(':') : []
      const right = rest ? rest.split(':') : []
      groups = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    }
    let value = 0n
    for (const group of groups) value = (value << 16n) | BigInt(Number.parseInt(group || '0', 16))
    return { version: 6, value }
  }
  return null
}

/** `::ffff:10.0.0.1` (how dual-stack sockets report IPv4 peers) is treated as `10.0.0.1`. */
export function unmapIpv4(address: string): string {
  const match = address.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i)
  return match?.[1] ?? address
}

export function parseCidr(text: string): Cidr | null {
  const [addressText = '', prefixText, extra] = text.trim().split('/')
  if (extra !== undefined) return null
  const address = parseIp(addressText)
  if (!address) return null
  const bits = address.version === 4 ? 32 : 128
  let prefix = bits
  if (prefixText !== undefined) {
    if (!/^\d{1,3}$/.test(prefixText)) return null
    prefix = Number(prefixText)
    if (prefix > bits) return null
  }
  const mask = prefixMask(bits, prefix)
  return { version: address.version, network: address.value & mask, prefix }
}

function prefixMask(bits: number, prefix: number): bigint {
  if (prefix === 0) return 0n
  return ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix)
}

export function ipInRanges(ip: string, ranges: readonly Cidr[]): boolean {
  const address = parseIp(ip)
  if (!address) return false
  for (const range of ranges) {
    if (range.version !== address.version) continue
    const mask = prefixMask(address.version === 4 ? 32 : 128, range.prefix)
    if ((address.value & mask) === range.network) return true
  }
  return false
}

export function parseCidrList(entries: readonly string[]): Cidr[] {
  return entries.map((entry) => parseCidr(entry)).filter((range): range is Cidr => range !== null)
}
