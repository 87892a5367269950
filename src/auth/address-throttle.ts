import { LruCache } from '../lib/lru-cache.ts';

/** Client addresses whose failed logins are counted; the least recently seen are forgotten beyond this. */
const ADDRESSES = 100_000;

interface Window {
  failures: number;
  startedAt: number;
}

/**
 * Failed logins per client address, whatever the usernames tried: past `maxFailures` within one
 * window, the address is refused until the window ends. Kept in this process's memory (a flood is
 * turned away without a database write); with several processes, each counts its own.
 */
export class AddressThrottle {
  readonly #maxFailures: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #windows = new LruCache<string, Window>(ADDRESSES);

  constructor(maxFailures: number, windowMs: number, now: () => number) {
    this.#maxFailures = maxFailures;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** Whether the address may try now. */
  check(address: string): { locked: false } | { locked: true; retryAfterSeconds: number } {
    const window = this.#current(address);
    if (window === undefined || window.failures < this.#maxFailures) return { locked: false };
    return { locked: true, retryAfterSeconds: Math.max(1, Math.ceil((window.startedAt + this.#windowMs - this.#now()) / 1000)) };
  }

  /** Counts one failed login from the address; the failure that reaches the limit starts a whole window of refusal. */
  fail(address: string): void {
    const window = this.#current(address) ?? { failures: 0, startedAt: this.#now() };
    window.failures += 1;
    if (window.failures === this.#maxFailures) window.startedAt = this.#now();
    this.#windows.set(address, window);
  }

  #current(address: string): Window | undefined {
    const window = this.#windows.get(address);
    return window !== undefined && this.#now() - window.startedAt < this.#windowMs ? window : undefined;
  }
}
