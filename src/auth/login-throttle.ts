import type { LoginPolicy } from '../config.ts';

/** What the throttle says about the next attempt of a username. */
export type ThrottleVerdict = { locked: false } | { locked: true; retryAfterSeconds: number };

interface FailureRecord {
  failures: number;
  /** When the current window started, in ms since the epoch. */
  windowStart: number;
}

const MAX_TRACKED_USERNAMES = 100_000;

/**
 * Per-username back-off for failed logins: every failure is answered a little
 * later than the one before, and once `maxFailures` failures fall inside one
 * window the username answers 429 until the window has passed. Kept in memory
 * and bounded, so a spray of made-up usernames cannot exhaust it.
 */
export class LoginThrottle {
  readonly #policy: LoginPolicy;
  readonly #now: () => number;
  readonly #records = new Map<string, FailureRecord>();
  /** Attempts whose password is being checked right now: they count as failures until they end. */
  readonly #pending = new Map<string, number>();

  constructor(policy: LoginPolicy, now: () => number = Date.now) {
    this.#policy = policy;
    this.#now = now;
  }

  /** Whether the username may try now. */
  check(username: string): ThrottleVerdict {
    const record = this.#current(username);
    const failures = record?.failures ?? 0;
    if (record !== undefined && failures >= this.#policy.maxFailures) {
      const endsAt = record.windowStart + this.#policy.lockSeconds * 1000;
      return { locked: true, retryAfterSeconds: Math.max(1, Math.ceil((endsAt - this.#now()) / 1000)) };
    }
    // Attempts sent all at once must not slip past the limit while their hashes run.
    if (failures + (this.#pending.get(username) ?? 0) >= this.#policy.maxFailures) return { locked: true, retryAfterSeconds: 1 };
    return { locked: false };
  }

  /** Admits an attempt whose password is about to be checked, or refuses it; end it with recordFailure or recordSuccess. */
  begin(username: string): ThrottleVerdict {
    const verdict = this.check(username);
    if (!verdict.locked) this.#pending.set(username, (this.#pending.get(username) ?? 0) + 1);
    return verdict;
  }

  /** Ends an attempt that neither failed nor succeeded (the check itself broke). */
  cancel(username: string): void {
    this.#end(username);
  }

  #end(username: string): void {
    const pending = (this.#pending.get(username) ?? 1) - 1;
    if (pending <= 0) this.#pending.delete(username);
    else this.#pending.set(username, pending);
  }

  /** Ends an attempt as a failure; returns how long to hold the 401 answer back, in ms. */
  recordFailure(username: string): number {
    this.#end(username);
    const record = this.#current(username) ?? { failures: 0, windowStart: this.#now() };
    record.failures += 1;
    // Once locked, the window restarts so the lock lasts lockSeconds from the last failure.
    if (record.failures >= this.#policy.maxFailures) record.windowStart = this.#now();
    this.#records.delete(username);
    this.#records.set(username, record);
    if (this.#records.size > MAX_TRACKED_USERNAMES) {
      const oldest = this.#records.keys().next();
      if (oldest.done !== true) this.#records.delete(oldest.value);
    }
    return failureDelayMs(record.failures);
  }

  /** Ends an attempt as a success: forgets the username's failures. */
  recordSuccess(username: string): void {
    this.#end(username);
    this.#records.delete(username);
  }

  /** The delay for another failure of a username, without recording one. */
  currentDelayMs(username: string): number {
    return failureDelayMs(this.#current(username)?.failures ?? 0);
  }

  #current(username: string): FailureRecord | undefined {
    const record = this.#records.get(username);
    if (record === undefined) return undefined;
    if (this.#now() - record.windowStart >= this.#policy.lockSeconds * 1000) {
      this.#records.delete(username);
      return undefined;
    }
    return record;
  }
}

/** The delay before answering the n-th consecutive failure: 0, 100, 200, 400 … ms, at most 1.6 s. */
export function failureDelayMs(failures: number): number {
  if (failures <= 1) return 0;
  return Math.min(100 * 2 ** (failures - 2), 1600);
}
