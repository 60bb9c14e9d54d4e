import type { Clock } from '../../lib/clock'

/**
 * How far back the average looks: the leads waiting in the group commit are averaged, weighted by
 * time, over about this many milliseconds (an exponential average). Shorter and a burst of a few
 * groups flips the worker to its floor; longer and the worker keeps its full speed for a while
 * after the lead path saturated.
 */
export const PRESSURE_WINDOW_MS = 250
/**
 * Saturated from this many leads waiting on average, and not again until the average falls below
 * PRESSURE_EXIT_LEADS (hysteresis, so the worker does not flap at the edge). Chosen by measurement
 * on the shared 2-core machine (docs/webhooks.md, "Inbound first"): saturated by 50 connections the
 * average was 20-43; at 1,000 leads/s without an endpoint 4-12 on that loaded machine, where the
 * same rate answers in a quarter of the time on a quiet one (about 1 lead waiting).
 */
export const PRESSURE_ENTER_LEADS = 16
export const PRESSURE_EXIT_LEADS = 8

/**
 * The inbound path's pressure, as the delivery worker sees it (docs/webhooks.md, "Inbound first"):
 * how many accepted leads are waiting in the group commit, queued or being written, averaged over
 * time. By Little's law that is the lead rate times the time a lead waits for its commit, so it
 * rises both when leads come faster and when each waits longer (every connection busy, or the event
 * loop behind: on a 2-core machine at saturation the connections were mostly idle, the process
 * short of CPU, and the leads waited for turns of the loop instead). Updated by the group commit at
 * every change and when read: no timer. One per replica, built in buildServices and handed to both.
 */
export class InboundPressure {
  private waiting = 0
  private average = 0
  private updatedAt: number
  private saturated = false

  constructor(private readonly clock: Clock) {
    this.updatedAt = clock.now()
  }

  /** The group commit: `delta` leads queued (positive) or answered (negative). */
  add(delta: number): void {
    this.advance()
    this.waiting += delta
  }

  /** Whether the lead path is saturated lately: the worker defers lead events meanwhile. */
  underPressure(): boolean {
    this.advance()
    if (this.saturated) this.saturated = this.average >= PRESSURE_EXIT_LEADS
    else this.saturated = this.average >= PRESSURE_ENTER_LEADS
    return this.saturated
  }

  /** The time-weighted average of leads waiting, for the benchmark's and the tests' eyes. */
  averageWaiting(): number {
    this.advance()
    return this.average
  }

  private advance(): void {
    const now = this.clock.now()
    const elapsed = now - this.updatedAt
    if (elapsed <= 0) return
    this.updatedAt = now
    const kept = Math.exp(-elapsed / PRESSURE_WINDOW_MS)
    this.average = this.average * kept + this.waiting * (1 - kept)
  }
}
