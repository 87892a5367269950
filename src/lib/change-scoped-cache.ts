import { LruCache } from './lru-cache.ts';
import { SharedWork } from './shared-work.ts';

/** The tables whose changes a ChangeSource tells of (PostgreSQL: the tables with the change-notice trigger). */
export type ChangeTable = 'credentials' | 'login_failures' | 'organizations' | 'rooms' | 'api_tokens';

/** Tells whether the database may have changed since a value was read from it. */
export interface ChangeSource {
  /**
   * A number that moves whenever another connection commits (SQLite's
   * `PRAGMA data_version`, PostgreSQL's change notices), or undefined while
   * the database cannot tell, so nothing is kept. With `asOf` (a
   * `performance.now()` reading), a reading taken since that moment will do:
   * the two caches a request reads share one.
   */
  token(asOf?: number): number | undefined;
  /**
   * Resolves once token() reflects every commit made before the moment
   * `asOf` (a `performance.now()` reading; PostgreSQL: the notices of those
   * commits have arrived); undefined when it does already (SQLite asks the
   * file itself, so always).
   */
  catchUp(asOf: number): Promise<void> | undefined;
  /**
   * The same source, telling only of commits that change one of these tables (PostgreSQL's
   * notices name their table; SQLite's file cannot tell, so any commit moves it).
   */
  about(tables: readonly ChangeTable[]): ChangeSource;
}

/** A source that can never tell: nothing is kept. */
export const NO_CHANGE_SOURCE: ChangeSource = { token: () => undefined, catchUp: () => undefined, about: () => NO_CHANGE_SOURCE };

export class ChangeScopedCache<K, V> {
  readonly #entries: LruCache<K, V>;
  readonly #changes: ChangeSource;
  #databaseToken: number | undefined;
  /** Moves with the database's token and with every delete or clear: a read begun before either is not kept. */
  #generation = 0;
  /** Loads under way (read), each with the generation it began in: callers in the same generation share it. */
  readonly #loading = new SharedWork<K, V>();

  /** `capacity` and `weigh` as for LruCache: entries, or a total weight such as bytes. */
  constructor(changes: ChangeSource, capacity: number, weigh?: (value: V) => number) {
    this.#changes = changes;
    this.#entries = new LruCache<K, V>(capacity, weigh);
  }

  /** Where the cache stands: take it before a read, and give it to set() after. */
  token(asOf?: number): number | undefined {
    const databaseToken = this.#changes.token(asOf);
    if (databaseToken === undefined) return undefined;
    if (databaseToken !== this.#databaseToken) {
      this.#entries.clear();
      this.#databaseToken = databaseToken;
      this.#generation += 1;
    }
    return this.#generation;
  }

  get(key: K, asOf?: number): V | undefined {
    return this.token(asOf) === undefined ? undefined : this.#entries.get(key);
  }

  /** Keeps a value read after token() gave `readAt`, unless the database changed or anything was forgotten since. */
  set(key: K, value: V, readAt: number | undefined): void {
    if (readAt !== undefined && this.token() === readAt) this.#entries.set(key, value);
  }

  /**
   * The value kept for the key, or what `load` reads now (kept unless something moved meanwhile):
   * either way at least as new as the moment `asOf` (a `performance.now()` reading, by default
   * now). A request passes the moment it arrived, so its reads share one catch-up.
   *
   * Concurrent callers in one generation share one load: it began after every change that
   * generation reflects, and a change since (another connection's commit before a caller's
   * moment, this process's own write) would have moved the generation before that caller asked.
   * After each commit, every request under way would otherwise read the same row again (one
   * query each: 32 connections, 200 commits a second).
   */
  async read(key: K, load: () => Promise<V>, asOf = performance.now()): Promise<V> {
    const caughtUp = this.#changes.catchUp(asOf);
    if (caughtUp !== undefined) await caughtUp;
    const kept = this.get(key, asOf);
    if (kept !== undefined) return kept;
    const readAt = this.token(asOf);
    if (readAt === undefined) return load();
    return this.#loading.run(key, readAt, async () => {
      const loaded = await load();
      this.set(key, loaded, readAt);
      return loaded;
    });
  }

  /** Runs this process's own write of what the key was read from, forgetting the key before and after it. */
  async forgetting<T>(key: K, write: () => Promise<T>): Promise<T> {
    this.delete(key);
    try {
      return await write();
    } finally {
      this.delete(key);
    }
  }

  /** Forgets a key after (and before) this process writes what it was read from. */
  delete(key: K): void {
    this.#entries.delete(key);
    this.#generation += 1;
  }

  clear(): void {
    this.#entries.clear();
    this.#generation += 1;
  }
}
