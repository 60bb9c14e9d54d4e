import type { AppContext } from '../../context'
import { AppError } from '../errors'
import { type RateLimitResult, type RateLimitRule, retryAfterSeconds } from './types'

/** Every bucket of DESIGN §5 counts requests per minute. */
export const WINDOW_MS = 60_000

/** The platform-wide cap that protects the service; checked beside every other bucket. */
export function platformRule(ctx: Pick<AppContext, 'config'>): RateLimitRule {
  return { bucket: 'platform', key: 'all', limit: ctx.config.platformRateLimitPerMin, windowMs: WINDOW_MS }
}

/** What a limiter's answer means for the response. */
export interface RateLimitDecision {
  /**
   * `X-RateLimit-*` of the most constraining bucket, plus `Retry-After` when refused. The caller
   * puts them on the response (Elysia's `set.headers`), which the error handler sends on errors too:
   * the one way these headers travel.
   */
  headers: Record<string, string>
  /** The 429 to throw, or null when every bucket allows the request. */
  refusal: AppError | null
}

/**
 * The decision on a limiter's result (DESIGN §5): pure, so the management plugin and the inbound
 * service apply it alike and neither reaches into the other.
 */
export function rateLimitDecision(result: RateLimitResult): RateLimitDecision {
  const { decisive } = result
  const headers: Record<string, string> = {
    'x-ratelimit-limit': String(decisive.limit),
    'x-ratelimit-remaining': String(decisive.remaining),
    'x-ratelimit-reset': String(Math.ceil(decisive.resetMs / 1000)),
  }
  if (result.allowed) return { headers, refusal: null }
  const retryAfter = retryAfterSeconds(decisive)
  headers['retry-after'] = String(retryAfter)
  return {
    headers,
    refusal: new AppError(
      'rate_limited',
      `rate limit exceeded: at most ${decisive.limit} requests per minute; retry in ${retryAfter} s`,
      { limit: decisive.limit, remaining: decisive.remaining, retry_after: retryAfter },
    ),
  }
}

/**
 * The limit check as its users receive it (buildServices binds it to the replica's limiter and
 * clock): one limiter call for the rules, and its decision.
 */
export type RateLimitCheck = (rules: RateLimitRule[]) => Promise<RateLimitDecision>

/** One limiter call for all the rules, and its decision. Writes nothing: the caller applies it. */
export async function checkRateLimit(
  ctx: Pick<AppContext, 'limiter' | 'clock'>,
  rules: RateLimitRule[],
): Promise<RateLimitDecision> {
  return rateLimitDecision(await ctx.limiter.check(rules, ctx.clock.now()))
}
