/**
 * Work under way, by key, each begun under a tag (a cache generation, a database token): callers
 * asking for the same key under the same tag share the one promise rather than doing the work
 * again. After each commit every request under way asks for the same things at once (32
 * connections, 200 commits a second); one load answers them all.
 *
 * An entry is forgotten when its work settles, so a failure is shared by those waiting on it only.
 */
export class SharedWork<K, V> {
  readonly #underWay = new Map<K, { tag: unknown; since: number; value: Promise<V> }>();

  /** The work under way for `key` begun under `tag`, or `work()` begun now (and shared until it settles). */
  run(key: K, tag: unknown, work: () => Promise<V>): Promise<V> {
    const shared = this.#underWay.get(key);
    if (shared !== undefined && shared.tag === tag) return shared.value;
    const value = work().finally(() => {
      if (this.#underWay.get(key)?.value === value) this.#underWay.delete(key);
    });
    this.#underWay.set(key, { tag, since: performance.now(), value });
    return value;
  }

  /** When the newest work for `key` began (`performance.now()`), under any tag, while it has not settled. */
  busySince(key: K): number | undefined {
    return this.#underWay.get(key)?.since;
  }
}
