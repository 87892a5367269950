/**
 * Work under way, by key, each begun under a tag (a cache generation, a database token): callers
 * asking for the same key under the same tag share the one promise rather than doing the work
 * again. After each commit every request under way asks for the same things at once (32
 * connections, 200 commits a second); one load answers them all.
 *
 * An entry is forgotten when its work settles, so a failure is shared by those waiting on it only.
 */
export class SharedWork<K, V> {
  readonly #underWay = new Map<K, { tag: unknown; value: Promise<V> }>();
  /** When each piece of work for the key still running began (`performance.now()`), oldest first, whatever its tag. */
  readonly #running = new Map<K, number[]>();

  /** The work under way for `key` begun under `tag`, or `work()` begun now (and shared until it settles). */
  run(key: K, tag: unknown, work: () => Promise<V>): Promise<V> {
    const shared = this.shared(key, tag);
    if (shared !== undefined) return shared;
    const since = performance.now();
    const starts = this.#running.get(key) ?? [];
    starts.push(since);
    this.#running.set(key, starts);
    const value = work().finally(() => {
      if (this.#underWay.get(key)?.value === value) this.#underWay.delete(key);
      starts.splice(starts.indexOf(since), 1);
      if (starts.length === 0) this.#running.delete(key);
    });
    this.#underWay.set(key, { tag, value });
    return value;
  }

  /** The work under way for `key` begun under `tag`, if any. */
  shared(key: K, tag: unknown): Promise<V> | undefined {
    const shared = this.#underWay.get(key);
    return shared !== undefined && shared.tag === tag ? shared.value : undefined;
  }

  /** How many pieces of work for `key` are still running, under any tag (one begun under a newer tag does not hide an older one). */
  running(key: K): number {
    return this.#running.get(key)?.length ?? 0;
  }

  /** When the oldest work for `key` still running began (`performance.now()`), under any tag. */
  busySince(key: K): number | undefined {
    return this.#running.get(key)?.[0];
  }
}
