/**
 * The open-loop harness's floor: a server that does nothing but read the JSON body and answer with
 * a body of the service's size, so the latency measured against it is the load generator's own
 * (timer slack, fetch, its event loop). Run: PORT=... bun bench/floor-server.ts
 */
const server = Bun.serve({
  port: Number(process.env.PORT ?? 3200),
  hostname: '127.0.0.1',
  async fetch(request) {
    if (request.method === 'GET') return new Response('ok')
    await request.json()
    return Response.json({ status: 'created', success: true, lead_id: Bun.randomUUIDv7() })
  },
})
console.log(`floor server listening on ${server.port}`)
