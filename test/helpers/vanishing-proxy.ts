import type { Socket, TCPSocketListener } from 'bun'

/** One client connection and its upstream; `dead` once the host vanished. */
interface Link {
  upstream: Socket<undefined> | null
  pending: Uint8Array[]
  dead: boolean
}

/**
 * A database host that vanishes without closing its connections (a crashed machine, a failover
 * behind a proxy or NAT that keeps the sockets open), for the tests of what the replica does then:
 * a TCP proxy on a free loopback port in front of `target`. `vanish()` makes every connection open
 * at that moment drop what it receives, both ways, and keep the socket open (it returns how many);
 * connections made afterwards are forwarded as before (the failover's host). `stop()` closes all.
 * `url` is the target's URL through the proxy.
 */
export function vanishingProxy(target: URL): { port: number; url: string; vanish(): number; stop(): void } {
  const links = new Set<Link>()
  const listener: TCPSocketListener<Link> = Bun.listen<Link>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        const link: Link = { upstream: null, pending: [], dead: false }
        client.data = link
        links.add(link)
        void Bun.connect<undefined>({
          hostname: target.hostname,
          port: Number(target.port || 5432),
          socket: {
            open(upstream) {
              link.upstream = upstream
              for (const chunk of link.pending) upstream.write(chunk)
              link.pending = []
            },
            data(_upstream, chunk) {
              if (!link.dead) client.write(chunk)
            },
            close() {
              if (!link.dead) client.end()
            },
          },
        })
      },
      data(client, chunk) {
        const link = client.data
        if (link.dead) return
        if (link.upstream) link.upstream.write(chunk)
        else link.pending.push(new Uint8Array(chunk))
      },
      close(client) {
        links.delete(client.data)
        client.data.upstream?.end()
      },
    },
  })
  // the target's URL (user, database, parameters) through the proxy
  const url = new URL(target)
  url.hostname = '127.0.0.1'
  url.port = String(listener.port)
  return {
    port: listener.port,
    url: url.toString(),
    vanish() {
      for (const link of links) link.dead = true
      return links.size
    },
    stop() {
      listener.stop(true)
      for (const link of links) link.upstream?.end()
    },
  }
}
