import { expect } from 'bun:test'
import { withTimeout } from '../../src/lib/timeout'

/** The answer, or a failure naming how long it did not come (a test never waits on a hung request). */
export function answeredWithin<T = Response>(response: Promise<T>, ms: number): Promise<T> {
  return withTimeout(response, ms, () => new Error(`no answer within ${ms} ms`))
}

/**
 * A request the database could not serve in time: answered 503 service_unavailable with
 * Retry-After (the body DESIGN §2 gives every error), no sooner than `atLeastMs` (the bound it waited
 * for) and no later than `withinMs`.
 */
export async function expectUnavailableWithin(
  response: Promise<Response>,
  { atLeastMs, withinMs }: { atLeastMs: number; withinMs: number },
): Promise<void> {
  const started = performance.now()
  const answer = await answeredWithin(response, withinMs)
  expect(performance.now() - started).toBeGreaterThanOrEqual(atLeastMs - 20)
  await expectServiceUnavailable(answer)
}

/** 503 service_unavailable with Retry-After: 5 and the body DESIGN §2 gives every error. */
export async function expectServiceUnavailable(answer: Response): Promise<void> {
  expect(answer.status).toBe(503)
  expect(answer.headers.get('retry-after')).toBe('5')
  expect(answer.headers.get('content-type')).toContain('application/json')
  expect(await answer.json()).toEqual({
    error: 'service_unavailable',
    message: 'the service is temporarily unavailable, retry shortly',
    request_id: answer.headers.get('x-request-id'),
  })
}

/**
 * How a piece of work (a periodic job's run) ended within `ms`: `resolved`, `rejected <code>` (the
 * driver's or the database's code, from the error or its cause), or `still waiting`. It is not
 * cancelled: a caller that got `still waiting` frees what it waits on and awaits it.
 */
export function settledWithin(work: Promise<unknown>, ms: number): Promise<string> {
  return withTimeout(
    work.then(
      () => 'resolved',
      (error: { code?: unknown; cause?: { code?: unknown } }) =>
        `rejected ${String(error?.code ?? error?.cause?.code ?? 'without a code')}`,
    ),
    ms,
  ).catch(() => 'still waiting')
}
