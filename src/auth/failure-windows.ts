import { LruCache } from '../lib/lru-cache.ts';

import { isIPv6 } from 'node:net';

/** Keys whose failed logins are counted; the least recently seen are forgotten beyond this. */
const KEYS = 100_000;

interface Window {
  failures: number;
  startedAt: number;
}

/**
 * Failed logins per key (a client address whatever the usernames tried, or a username whatever
 * the addresses): past `maxFailures` within one window, the key is refused until the window ends.
 * Kept in this process's memory (a flood is turned away without a database write); with several
 * processes, each counts its own.
 */
export class FailureWindows {
  readonly #maxFailures: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #windows = new LruCache<string, Window>(KEYS);

  constructor(maxFailures: number, windowMs: number, now: () => number) {
    this.#maxFailures = maxFailures;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** Whether the key may try now. */
  check(address: string): { locked: false } | { locked: true; retryAfterSeconds: number } {
    const window = this.#current(address);
    if (window === undefined || window.failures < this.#maxFailures) return { locked: false };
    return { locked: true, retryAfterSeconds: Math.max(1, Math.ceil((window.startedAt + this.#windowMs - this.#now()) / 1000)) };
  }

  /** Counts one failed login of the key; the failure that reaches the limit starts a whole window of refusal. */
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

/**
 * The address failures are counted under: an IPv4 address as it is (also when IPv4-mapped), an
 * IPv6 address by its /64 network, which one client usually holds whole.
 */
export function clientKey(address: string): string {
  if (!address.includes(':')) return address; // IPv4, the common case: no pattern to run
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const front = head === '' ? [] : head.split(':');
  const back = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((group) => group.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
