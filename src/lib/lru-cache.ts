/**
 * A bounded map that forgets the least recently used entries first. The bound
 * is a total weight: one per entry unless a `weigh` function says otherwise
 * (e.g. the rows of a cached page), so large values cannot crowd the memory.
 */
export class LruCache<K, V> {
  readonly #entries = new Map<K, { value: V; weight: number }>();
  readonly #capacity: number;
  readonly #weigh: (value: V) => number;
  #weight = 0;

  constructor(capacity: number, weigh: (value: V) => number = () => 1) {
    this.#capacity = capacity;
    this.#weigh = weigh;
  }

  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** Stores the value unless it alone outweighs the whole cache. */
  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.#weigh(value);
    if (weight > this.#capacity) return;
    this.#entries.set(key, { value, weight });
    this.#weight += weight;
    for (const [oldest, entry] of this.#entries) {
      if (this.#weight <= this.#capacity) break;
      this.#entries.delete(oldest);
      this.#weight -= entry.weight;
    }
  }

  delete(key: K): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#weight -= entry.weight;
  }

  clear(): void {
    this.#entries.clear();
    this.#weight = 0;
  }

  /** Every entry, least recently used first, without using any. */
  *entries(): IterableIterator<[K, V]> {
    for (const [key, entry] of this.#entries) yield [key, entry.value];
  }

  get size(): number {
    return this.#entries.size;
  }
}
