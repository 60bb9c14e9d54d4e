/** Time comes from the context, so windows and expiry can be tested exactly without sleeping. */
export interface Clock {
  now(): number
}

export const systemClock: Clock = { now: () => Date.now() }

export class FakeClock implements Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current
  }
  advance(milliseconds: number): void {
    this.current += milliseconds
  }
  set(epochMilliseconds: number): void {
    this.current = epochMilliseconds
  }
}
