import type { Clock } from '../../lib/clock'

/**
 * How long a busy spell must last to count, and how fast the past fades: the share of time the
 * group commit had every connection busy is averaged over about this many milliseconds. Shorter
 * and a burst of a few groups (every connection busy for 2-3 ms at 1,000 leads/s) flips the worker
 * to its floor; longer and the worker keeps taking connections for a while after saturation began.
 */
export const PRESSURE_WINDOW_MS = 250
/**
 * Saturated from this busy share up, and not again until it falls below PRESSURE_EXIT (hysteresis,
 * so the worker does not flap at the edge). Measured with bench/ingest.ts (docs/webhooks.md,
 * "Inbound first"): at saturation the share stays at 0.95-1.0; at 1,000 leads/s on PostgreSQL it
 * stays under 0.05.
 */
export const PRESSURE_ENTER = 0.8
export const PRESSURE_EXIT = 0.5

/**
 * The inbound path's pressure, as the delivery worker sees it (docs/webhooks.md, "Inbound first").
 * The group commit reports when every database connection it may use is busy with a group and when
 * one is free again; this keeps the time-weighted share of "all busy" over the last
 * PRESSURE_WINDOW_MS (an exponential average, updated only at those changes and when read: no
 * timer). One per replica, built in buildServices and handed to both sides.
 */
export class InboundPressure {
  private busy = false
  private share = 0
  private updatedAt: number
  private saturated = false

  constructor(private readonly clock: Clock) {
    this.updatedAt = clock.now()
  }

  /** The group commit: every connection busy (true) or one free again (false). */
  setBusy(busy: boolean): void {
    if (busy === this.busy) return
    this.advance()
    this.busy = busy
  }

  /** Whether leads are waiting for connections most of the time lately: the worker defers. */
  underPressure(): boolean {
    this.advance()
    if (this.saturated) this.saturated = this.share >= PRESSURE_EXIT
    else this.saturated = this.share >= PRESSURE_ENTER
    return this.saturated
  }

  /** The busy share now (0-1), for the benchmark's and the tests' eyes. */
  busyShare(): number {
    this.advance()
    return this.share
  }

  private advance(): void {
    const now = this.clock.now()
    const elapsed = now - this.updatedAt
    if (elapsed <= 0) return
    this.updatedAt = now
    const kept = Math.exp(-elapsed / PRESSURE_WINDOW_MS)
    this.share = this.share * kept + (this.busy ? 1 - kept : 0)
  }
}
