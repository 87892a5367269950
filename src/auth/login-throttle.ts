import type { LoginPolicy } from '../config.ts';

/** What the throttle says about the next attempt of a username. */
export type ThrottleVerdict = { locked: false } | { locked: true; retryAfterSeconds: number };

/** Failed logins of one username, as the database keeps them (shared by every process). */
export interface FailureRecord {
  failures: number;
  /** When the current window started, in ms since the epoch. */
  windowStart: number;
}

/**
 * Per-username back-off for failed logins: every failure is answered a little
 * later than the one before, and once `maxFailures` failures fall inside one
 * window the username answers 429 until the window has passed. The failure
 * records live in the database (login_failures), so the back-off holds across
 * processes; this class decides from a record, and counts the attempts of this
 * process whose password is being checked right now.
 */
export class LoginThrottle {
  readonly #policy: LoginPolicy;
  readonly #now: () => number;
  /** Attempts whose password is being checked right now: they count as failures until they end. */
  readonly #pending = new Map<string, number>();

  constructor(policy: LoginPolicy, now: () => number = Date.now) {
    this.#policy = policy;
    this.#now = now;
  }

  /** The record if its window is still open, else undefined (an expired record counts for nothing). */
  current(record: FailureRecord | undefined): FailureRecord | undefined {
    if (record === undefined) return undefined;
    return this.#now() - record.windowStart >= this.#policy.lockSeconds * 1000 ? undefined : record;
  }

  /** Whether the username, with this stored record, may try now. */
  check(username: string, stored: FailureRecord | undefined): ThrottleVerdict {
    const record = this.current(stored);
    const failures = record?.failures ?? 0;
    if (record !== undefined && failures >= this.#policy.maxFailures) {
      const endsAt = record.windowStart + this.#policy.lockSeconds * 1000;
      return { locked: true, retryAfterSeconds: Math.max(1, Math.ceil((endsAt - this.#now()) / 1000)) };
    }
    // Attempts sent all at once must not slip past the limit while their hashes run.
    if (failures + (this.#pending.get(username) ?? 0) >= this.#policy.maxFailures) return { locked: true, retryAfterSeconds: 1 };
    return { locked: false };
  }

  /** Admits an attempt whose password is about to be checked, or refuses it; end it with end(). */
  begin(username: string, stored: FailureRecord | undefined): ThrottleVerdict {
    const verdict = this.check(username, stored);
    if (!verdict.locked) this.#pending.set(username, (this.#pending.get(username) ?? 0) + 1);
    return verdict;
  }

  /** Ends an admitted attempt, whatever its outcome. */
  end(username: string): void {
    const pending = (this.#pending.get(username) ?? 1) - 1;
    if (pending <= 0) this.#pending.delete(username);
    else this.#pending.set(username, pending);
  }
}

/** The delay before answering the n-th consecutive failure: 0, 100, 200, 400 … ms, at most 1.6 s. */
export function failureDelayMs(failures: number): number {
  if (failures <= 1) return 0;
  return Math.min(100 * 2 ** (failures - 2), 1600);
}
