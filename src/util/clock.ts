// The clock the storage engine reads: the compactor's grace periods, expiry of audit rows,
// idempotency keys and multipart uploads, delivery schedules, segment timestamps. Production
// reads the wall clock (`realClock`); tests pass a clock they move by hand, so that a grace
// period passes without a sleep.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const realClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told (tests, the fault simulation). */
export class ManualClock implements Clock {
  constructor(private at = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.at;
  }

  advance(ms: number): void {
    this.at += ms;
  }
}
