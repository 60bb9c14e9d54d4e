/**
 * A server that does nothing but read the JSON body and answer with a body of the service's size.
 * Against it the open-loop latency is the load generator's own (timer slack, fetch, its event loop),
 * and `bench:pipeline` measures a bare Bun server's CPU with the same handler in-process.
 * Run: PORT=... bun bench/floor-server.ts
 */
export async function answerWithoutWork(request: Request): Promise<Response> {
  if (request.method === 'GET') return new Response('ok')
  await request.json()
  return Response.json({ status: 'created', success: true, lead_id: Bun.randomUUIDv7() })
}

if (import.meta.main) {
  const server = Bun.serve({
    port: Number(process.env.PORT ?? 3200),
    hostname: '127.0.0.1',
    fetch: answerWithoutWork,
  })
  console.log(`floor server listening on ${server.port}`)
}
