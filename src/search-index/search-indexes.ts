import {
  bytesOfParts,
  mayMatch,
  placeAgainstPage,
  SearchIndex,
  stateOfChange,
  warmUp,
  type ChangedUser,
  type OrderedQuery,
  type RoomMembers,
  type SearchIndexParts,
  type UserState,
} from '../domain/search-index.ts';
import type { SignatoryFilter } from '../domain/signatory-rules.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import type { SearchIndexPolicy } from '../config.ts';
import { findDirectoryVersions, findOrganizationSize, findOrganizationsBySize } from '../repositories/search-index-repository.ts';
import { LOOKUP_SCOPE_TABLES, type DirectoryScope } from '../repositories/directory-repository.ts';
import { NO_CHANGE_SOURCE, type ChangeSource } from '../lib/change-scoped-cache.ts';
import { readLoadJob, type LoadJob, type LoadResult, type RunningLoad } from './loader.ts';

/** Where log lines go (the app's logger). */
export interface SearchIndexLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

/** Bytes an index holds per user, roughly and with some headroom, to skip a load that could not fit. */
const BYTES_PER_USER = 84;

/** The most users an organization may have to get an index: one that could not fit is not read. */
export function maxIndexedUsers(policy: SearchIndexPolicy): number {
  return Math.floor(policy.memoryBytes / BYTES_PER_USER);
}
/** After a load fails (the database went away), the organization is not tried again for this long. */
const RETRY_AFTER_MS = 30_000;
/** A load running longer than this is stopped (and counts as failed): a stuck one must not hold the queue. */
const LOAD_TIMEOUT_MS = 5 * 60_000;
/**
 * An index is brought up to a new version from what changed, as long as at most this many users
 * changed since it was read whole; beyond, it is read whole again, and lookups use the database
 * meanwhile. Laying changes over an index runs on the request thread, for longer the more users
 * changed.
 */
export const MAX_LAID_OVER = 10_000;
/**
 * Beyond this many users changed since the index was read whole or last compacted, the changes are
 * merged into it in memory (SearchIndex.compacted): a write never makes a server read an index
 * whole, which takes a loading process seconds of the database's time. Merging keeps searches and
 * pages cheap, as each looks at the changes laid over (bench/index-updates.ts lays changes as the
 * servers do, merging them as often).
 */
export const COMPACT_AFTER = 1_000;
/**
 * The merge runs in steps between requests (#mergeInSteps) while updates go on being laid over
 * the index; past this many changes laid over (the steps fell behind), it is done at once.
 */
const COMPACT_AT_ONCE_AFTER = 4 * COMPACT_AFTER;
/** A merge in steps holds the request thread about this long at a time. */
const MERGE_SLICE_MS = 4;
/**
 * An import that changes more users of an organization than this leaves a copy of its index
 * (import-copies.ts): a server holding the index may have up to COMPACT_AT_ONCE_AFTER
 * changes laid over it already, and lays at most MAX_LAID_OVER.
 */
export const IMPORT_COPY_AFTER = MAX_LAID_OVER - COMPACT_AT_ONCE_AFTER;
/**
 * How often the database's change token is looked at (a file read on SQLite, a counter of notices
 * on PostgreSQL): when it moved, the versions of the organizations held are read, so an import's
 * changes are applied a moment after it commits. Without a token, the versions are read every
 * WATCH_WITHOUT_TOKEN_MS.
 */
const WATCH_MS = 50;
const WATCH_WITHOUT_TOKEN_MS = 500;
/**
 * While no lookup has asked for an index for this long, the versions are read at most every
 * WATCH_IDLE_MS: a server that takes only writes (or none) keeps its indexes a second behind at
 * most rather than taking each batch in, 20 times a second, on the thread its writes wait for.
 * The first lookup after that waits for one update of what changed meanwhile.
 */
const ASKED_LATELY_MS = 10_000;
const WATCH_IDLE_MS = 1000;
/** The rooms of an organization whose lookups' scope is read with its changes (see scopeAsOf): the latest asked for. */
const SCOPE_ROOMS = 32;
/**
 * How long a starting server waits at most for the indexes it takes from their copies on disk (see
 * preload): well under the 10 s Fastify gives an onReady hook before the start fails.
 */
const PRELOAD_WAIT_MS = 5_000;
/**
 * The members of an organization's largest rooms are read as soon as its index is held (not when a
 * lookup first filters on them, which the database answers meanwhile: hundreds of milliseconds in
 * a room of 100,000 members, while a loading process reads them for a second or more), in at most
 * this share of the memory, and only in memory free.
 */
const PRELOADED_ROOMS_SHARE = 1 / 8;
/** Organizations remembered as not indexed, or as failed: the oldest are forgotten beyond this (and may be looked at again). */
const REMEMBERED = 10_000;

interface Ready {
  index: SearchIndex;
  rooms: Map<string, RoomMembers>;
  /** The updates laid over the index since it was read, newest first (see UpdateLog). */
  log?: UpdateLog;
  /** Rooms' members read at a version the index has not reached yet: held once it has (see #placeMembers). */
  pendingRooms?: Map<string, PendingMembers>;
  /** The rooms whose lookups' scope is read with the changes (see askScope), the latest asked for last. */
  scopeRooms?: string[];
  /** The scope read with the latest changes taken in (see scopeAsOf). */
  scope?: ScopeRead;
  /** The users the latest change reads found (see changedUserAt). */
  changedUsers?: ChangedUsers;
}

/** A lookup's scope as read with an index's changes: when that read began, and the change token just before. */
interface ScopeRead {
  readFrom: number;
  token: number | undefined;
  scope: DirectoryScope;
}

/** The users change reads found, by seq (up to LOGGED_CHANGES, the latest last), each with the version read at. */
type ChangedUsers = Map<number, { version: number; user: ChangedUser }>;

/** A room's members as a loader read them, at `version`; `mayDrop`: other organizations' indexes may be dropped to hold them. */
interface PendingMembers {
  version: number;
  seqs: Float64Array;
  mayDrop: boolean;
}

/** The users a change read found at `version` added to those kept, for the pages they come onto (see changedUserAt); the earliest go beyond LOGGED_CHANGES. */
function withChangedUsers(kept: ChangedUsers = new Map(), version: number, changed: readonly ChangedUser[]): ChangedUsers {
  for (const user of changed) {
    kept.delete(user.seq);
    kept.set(user.seq, { version, user });
  }
  for (const seq of kept.keys()) {
    if (kept.size <= LOGGED_CHANGES) break;
    kept.delete(seq);
  }
  return kept;
}

/** One update of a held index: from one version to the next, the users it changed (before and after), and the rooms whose member lists were replaced. */
interface LoggedUpdate {
  from: number;
  to: number;
  changes: readonly { before: UserState | undefined; after: UserState }[];
  /** The seqs of the users it changed. */
  seqs: ReadonlySet<number>;
  /** The rooms each user it changed is a member of after it, by seq. */
  memberships: ReadonlyMap<number, readonly string[]>;
  replacedRooms: ReadonlySet<string>;
}

/**
 * The updates of a held index, newest first: each update adds a link to the log before it, which
 * it shares (an array copied whole at every update, 4,096 entries under steady single writes, took
 * 1.3% of a lookup server's time beside 200 writes/s). Once it holds more than twice
 * LOGGED_CHANGES changed users it is made anew of the newest LOGGED_CHANGES' worth, so each
 * change is copied about once.
 */
interface UpdateLog {
  update: LoggedUpdate;
  earlier: UpdateLog | undefined;
  /** Changed users in this update and the earlier ones. */
  changes: number;
}

/** Changed users kept in the log of each index (up to twice as many, see UpdateLog): enough to carry answers across a few seconds of steady writes. */
const LOGGED_CHANGES = 4_096;

/** What a lookup asks of an organization, for carrying a cached answer across versions (see unchangedFor). */
export interface LookupQuery {
  roomId: string;
  terms: readonly string[];
  includeExternal: boolean;
  filter: SignatoryFilter;
}

/** Rooms' members of an index held, known to be unchanged up to directory version `upTo`. */
interface StandingRooms {
  rooms: Map<string, RoomMembers>;
  upTo: number;
}

/** An organization's index (brought up to date, or read whole), a room's members, or its largest rooms' members. */
type Job = { kind: 'organization'; orgId: string } | { kind: 'room'; orgId: string; roomId: string } | { kind: 'rooms'; orgId: string };

/**
 * What is read of the directory in the server's own process: an organization's size, organizations'
 * versions, and the users changed since a version (a few thousand rows at most, read in one
 * snapshot: a loading process would take longer to start than the read).
 */
export interface DirectoryReads {
  /** The organizations of at least `minUsers` users, largest first. */
  bySize(minUsers: number): Promise<{ orgId: string; users: number }[]>;
  sizeOf(orgId: string): Promise<{ version: number; users: number } | undefined>;
  versionsOf(orgIds: readonly string[]): Promise<Map<string, number>>;
  changesSince(job: Extract<LoadJob, { kind: 'changes' }>): Promise<LoadResult>;
  /**
   * The copy of the organization's index kept on disk, if there is one of the directory at
   * `version` or an earlier version the database lists, later than `after`
   * (src/search-index/snapshots.ts).
   */
  snapshotOf(orgId: string, version: number, after: number): Promise<SearchIndexParts | undefined>;
}

/** Starts a load (in a process of its own: src/search-index/loader.ts). */
export type Loader = (job: LoadJob) => RunningLoad;

/**
 * The index holds the keys as a string of its own: the bytes handed over by the loader are freed
 * now, not at some later collection, so the server does not hold both until then. Only
 * bytes that own their whole buffer, which a loader's large keys do (small ones may share Node's
 * pool, which must stay).
 */
function releaseKeys(keys: Uint8Array): void {
  const buffer = keys.buffer;
  if (buffer instanceof ArrayBuffer && keys.byteOffset === 0 && keys.byteLength === buffer.byteLength && keys.byteLength >= 1 << 20) buffer.transfer(0);
}

/** Bytes an index and its rooms' members take. */
function bytesHeld(ready: Ready): number {
  return ready.index.bytes + bytesOfRooms(ready.rooms);
}

/** Bytes the members of these rooms take. */
function bytesOfRooms(rooms: ReadonlyMap<string, RoomMembers>): number {
  let bytes = 0;
  for (const members of rooms.values()) bytes += members.bytes;
  return bytes;
}

/** The same rooms' members among `users` users (users added since come last, and are members of none of them). */
function roomsExtendedTo(rooms: ReadonlyMap<string, RoomMembers>, users: number): Map<string, RoomMembers> {
  return new Map([...rooms].map(([roomId, members]) => [roomId, members.extendedTo(users)]));
}

/**
 * The log with one more update; made anew of the newest updates up to LOGGED_CHANGES changed users
 * once it holds twice as many; none after an update of more than LOGGED_CHANGES.
 */
function logWith(log: UpdateLog | undefined, update: LoggedUpdate): UpdateLog | undefined {
  if (update.changes.length > LOGGED_CHANGES) return undefined;
  const logged = { update, earlier: log, changes: (log?.changes ?? 0) + update.changes.length };
  if (logged.changes <= 2 * LOGGED_CHANGES) return logged;
  const newest: LoggedUpdate[] = [];
  let changes = 0;
  for (let link: UpdateLog | undefined = logged; link !== undefined; link = link.earlier) {
    changes += link.update.changes.length;
    if (changes > LOGGED_CHANGES) break;
    newest.push(link.update);
  }
  let made: UpdateLog | undefined;
  for (let k = newest.length - 1; k >= 0; k--) made = { update: newest[k]!, earlier: made, changes: (made?.changes ?? 0) + newest[k]!.changes.length };
  return made;
}

/** Sets `key` (as the newest entry), forgetting the oldest entries beyond REMEMBERED. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  for (const oldest of map.keys()) {
    if (map.size <= REMEMBERED) break;
    map.delete(oldest);
  }
}

/** Tells queued jobs apart: one load per organization, one per room, one of the largest rooms per organization. */
function jobKey(job: Job): string {
  if (job.kind === 'room') return `r\0${job.orgId}\0${job.roomId}`;
  if (job.kind === 'rooms') return `l\0${job.orgId}`;
  return `o\0${job.orgId}`;
}

/**
 * Keeps an in-memory SearchIndex per large organization, loaded in the
 * background and used only at exactly the directory version it is at: a
 * lookup at another version is answered by the database, and has the index
 * brought up to that version, by laying what changed over it (or, for many
 * changes, by reading it whole again). Room members are loaded the same way,
 * when a filter needs them. Loads and updates run one at a time, whole reads
 * each in a process of its own; the least recently used indexes are dropped
 * to stay within the memory policy.
 */
export class SearchIndexes {
  readonly #policy: SearchIndexPolicy;
  readonly #load: Loader;
  readonly #log: SearchIndexLog;
  /** In least recently used order: a use moves an entry to the end. */
  readonly #ready = new Map<string, Ready>();
  /** Organizations not indexed at a version (too few users, or too many for the memory). */
  readonly #skipped = new Map<string, number>();
  /**
   * Organizations whose index was dropped to make room, with the version and the bytes it had: at
   * that version it is loaded again only into free memory, never dropping another (two that do not
   * fit together would otherwise push each other out, one load after the other).
   */
  readonly #dropped = new Map<string, { version: number; bytes: number }>();
  readonly #failedAt = new Map<string, number>();
  readonly #queue: Job[] = [];
  readonly #queued = new Set<string>();
  /** The worker taking jobs from the queue, and the job it runs now. */
  #running: Promise<void> | undefined;
  /** Organizations whose held index is being merged in steps (see #mergeInSteps). */
  readonly #merging = new Set<string>();
  #working: Job | undefined;
  /** The loading process running the queue's job, if it needs one. */
  readonly #current = new Set<RunningLoad>();
  #closed = false;

  readonly #reads: DirectoryReads;
  /** For each job queued or running, what resolves once it is done (see catchUp). */
  readonly #done = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  #watch: NodeJS.Timeout | undefined;
  #checking = false;
  /** The change token when the versions were last read, and when. */
  #checkedToken: number | undefined;
  #checkedAt = 0;
  /** When a lookup last asked for an index (see ASKED_LATELY_MS). */
  #askedAt = -Infinity;
  #warm = false;
  /** Tells of the commits that change what a lookup's scope is read from (given to watch); undefined until then. */
  #scopeChanges: ChangeSource | undefined;

  /**
   * `db` makes the `reads` not given (the organizations by size, sizes, versions, what changed,
   * none of the copies); `load` reads an index whole, or a room's members, in a process of its own.
   */
  constructor(db: Kysely<Database>, policy: SearchIndexPolicy, load: Loader, log: SearchIndexLog, reads: Partial<DirectoryReads> = {}) {
    this.#policy = policy;
    this.#load = load;
    this.#log = log;
    this.#reads = {
      bySize: reads.bySize ?? ((minUsers) => findOrganizationsBySize(db, minUsers)),
      sizeOf: reads.sizeOf ?? ((orgId) => findOrganizationSize(db, orgId)),
      versionsOf: reads.versionsOf ?? ((orgIds) => findDirectoryVersions(db, orgIds)),
      changesSince: reads.changesSince ?? ((job) => readLoadJob(db, job)),
      snapshotOf: reads.snapshotOf ?? (async () => undefined),
    };
  }

  /** The organization's index at exactly this version; otherwise undefined, and a load is queued if one is worth it. */
  index(orgId: string, version: number): SearchIndex | undefined {
    if (this.#policy.memoryBytes === 0) return undefined;
    this.#askedAt = performance.now();
    const ready = this.#ready.get(orgId);
    if (ready !== undefined && ready.index.version === version) {
      this.#ready.delete(orgId);
      this.#ready.set(orgId, ready);
      return ready.index;
    }
    // A lookup that read its version just before a change landed: the newer index held stays, and nothing is loaded.
    if (ready !== undefined && ready.index.version > version) return undefined;
    // An older index is not used again, but kept until the load replaces it: what changed since is applied to it.
    const dropped = this.#dropped.get(orgId);
    if (dropped?.version === version && this.#held() + dropped.bytes > this.#policy.memoryBytes) return undefined;
    if (this.#skipped.get(orgId) !== version) this.#enqueue({ kind: 'organization', orgId });
    return undefined;
  }

  /** The room's members in the organization's index; otherwise undefined, and a load is queued. */
  members(orgId: string, index: SearchIndex, roomId: string): RoomMembers | undefined {
    const ready = this.#ready.get(orgId);
    if (ready === undefined || ready.index !== index) return undefined;
    const members = ready.rooms.get(roomId);
    // Read already, at a version the index is about to reach: held then.
    if (members === undefined && ready.pendingRooms?.has(roomId) !== true) this.#enqueue({ kind: 'room', orgId, roomId });
    return members;
  }

  /**
   * Whether no change between directory versions `from` and `to` can touch the answer of this
   * lookup: the organization's index is held at `to`, its log covers every update since `from`,
   * no room of the lookup had its member list replaced, and no changed user may match it before
   * or after. A cached answer of version `from` is then the answer at `to` (read your writes holds:
   * what changed since is known and misses the lookup).
   */
  unchangedFor(orgId: string, from: number, to: number, query: LookupQuery): boolean {
    return this.#everyUpdate(orgId, from, to, query.roomId, (update) =>
      update.changes.every(
        ({ before, after }) =>
          !mayMatch(after, query.terms, query.includeExternal, query.filter) &&
          (before === undefined || !mayMatch(before, query.terms, query.includeExternal, query.filter)),
      ),
    );
  }

  /**
   * Whether a full page of a lookup without terms, its users' seqs as they were at directory
   * version `from`, is its page at `to` too: the organization's index is held at `to`, its log
   * covers every update since `from`, no room of the lookup had its member list replaced, none of
   * the page's users changed, and every changed user fell alike against the page before and after
   * each update (placeAgainstPage). Under steady writes most changes fall outside a lookup's page
   * (a user created or renamed sorts after a first page's last user), and the page is not looked
   * for again in the order, only its total moves.
   */
  pageStands(orgId: string, from: number, to: number, query: LookupQuery & OrderedQuery, seqs: readonly number[]): boolean {
    const index = this.#ready.get(orgId)?.index;
    if (index?.version !== to || seqs.length === 0 || query.terms.length > 0) return false;
    const first = index.userOf(seqs[0]!);
    const last = index.userOf(seqs.at(-1)!);
    if (first < 0 || last < 0) return false;
    const page = { first: index.stateOf(first).key, last: index.stateOf(last).key };
    return this.#everyUpdate(
      orgId,
      from,
      to,
      query.roomId,
      (update) =>
        seqs.every((seq) => !update.seqs.has(seq)) &&
        update.changes.every(({ before, after }) => {
          const now = placeAgainstPage(after, page, query);
          return now !== 'open' && placeAgainstPage(before, page, query) === now;
        }),
    );
  }

  /**
   * Whether none of these users (seqs) changed between directory versions `from` and `to`, as a
   * lookup in `roomId` shows them (their membership of it included): the organization's index is
   * held at `to`, its log covers every update since `from`, and the room's member list was not
   * replaced. A page of them read at `from` is then as they are at `to`.
   */
  usersUnchanged(orgId: string, from: number, to: number, roomId: string, seqs: readonly number[]): boolean {
    return this.#everyUpdate(orgId, from, to, roomId, (update) => seqs.every((seq) => !update.seqs.has(seq)));
  }

  /**
   * The user of this seq as the latest change read found it (its shown fields and rooms), if that
   * was at `version` or before and nothing changed it since, as a lookup in `roomId` shows it
   * (usersUnchanged); undefined otherwise. Under steady writes the users new on a page are most
   * often those just changed: their rows come from here, and the page needs no read of its own.
   */
  changedUserAt(orgId: string, version: number, roomId: string, seq: number): ChangedUser | undefined {
    const changed = this.#ready.get(orgId)?.changedUsers?.get(seq);
    if (changed === undefined || changed.version > version || !this.usersUnchanged(orgId, changed.version, version, roomId, [seq])) return undefined;
    return changed.user;
  }

  /** Whether the log of the organization's index (held at `to`) covers every update since `from`, none replaced the room's member list, and each passes `test`. */
  #everyUpdate(orgId: string, from: number, to: number, roomId: string, test: (update: LoggedUpdate) => boolean): boolean {
    const ready = this.#ready.get(orgId);
    if (ready?.index.version !== to || ready.log === undefined) return false;
    let at = to;
    for (let link: UpdateLog | undefined = ready.log; link !== undefined && at > from; link = link.earlier) {
      const update = link.update;
      if (update.to !== at || update.from < from) return false;
      if (update.replacedRooms.has(roomId) || !test(update)) return false;
      at = update.from;
    }
    return at === from;
  }

  /** Indexes held, and loads waiting or running: for /readyz. */
  status(): { organizations: number; loading: number } {
    return { organizations: this.#ready.size, loading: this.#queued.size };
  }

  /**
   * Queues a load for every organization large enough, largest first, as far as the memory allows;
   * resolves once the loads have taken every index they could from its copy on disk, that is when
   * none is left or one needs a loading process (a whole read from the database, which goes on in
   * the background), or after `withinMs` at most, listing included. A server listens then: copies
   * take about a second at a million users, lookups with terms answered by the database meanwhile
   * otherwise. Never rejects: a listing that fails is logged.
   */
  async preload(withinMs = PRELOAD_WAIT_MS): Promise<void> {
    if (this.#policy.memoryBytes === 0) return;
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)));
    const listed = this.#queueLargest().catch((error: unknown) => this.#log.warn({ err: error }, 'search index: could not list the organizations to load'));
    await Promise.race([listed, timedOut]);
    while (this.#working !== undefined && this.#current.size === 0 && performance.now() - started < withinMs) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    clearTimeout(timer);
  }

  async #queueLargest(): Promise<void> {
    let planned = 0;
    for (const { orgId, users } of await this.#reads.bySize(Math.max(1, this.#policy.minUsers))) {
      planned += users * BYTES_PER_USER;
      if (planned > this.#policy.memoryBytes) break;
      this.#enqueue({ kind: 'organization', orgId });
    }
  }

  /**
   * Waits, at most `withinMs`, for the organization's index held at an older version to be brought
   * up to `version` (queued now if it is not yet): a lookup with terms is then answered from it a
   * moment later, rather than by the database at length. Under steady writes the index is always a
   * version or two behind, so this waits for the update running and then for the one queued after
   * it, as long as nothing but this organization's updates (or a room's members) runs first. At
   * once when no index is held, or it is at the version already. True when the index is held at
   * the version (or beyond) on return, or the wait was for its update and ran out of time: waiting
   * again for a later version is then worth it; false when it returned without waiting on it.
   */
  async catchUp(orgId: string, version: number, withinMs: number): Promise<boolean> {
    const deadline = performance.now() + withinMs;
    const key = jobKey({ kind: 'organization', orgId });
    for (;;) {
      const ready = this.#ready.get(orgId);
      if (ready === undefined) return false;
      if (ready.index.version >= version) return true;
      this.index(orgId, version);
      const done = this.#done.get(key);
      // Not behind other loads, or a whole read of seconds.
      const first = this.#working?.kind === 'room' ? this.#queue[0] : this.#working;
      if (done === undefined || first === undefined || jobKey(first) !== key) return false;
      const left = deadline - performance.now();
      if (left <= 0) return true;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([done.promise, new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
  }

  /** The organization's index if it is held at exactly this version; nothing is queued otherwise. */
  heldAt(orgId: string, version: number): SearchIndex | undefined {
    const ready = this.#ready.get(orgId);
    return ready?.index.version === version ? this.index(orgId, version) : undefined;
  }

  /** Whether the organization's index is held at a version newer than `version` (it read changes committed since). */
  heldAhead(orgId: string, version: number): boolean {
    const held = this.#ready.get(orgId)?.index.version;
    return held !== undefined && held > version;
  }

  /** Whether the organization's index is held, at a version older than `version` (it will be brought up to it). */
  heldBehind(orgId: string, version: number): boolean {
    const held = this.#ready.get(orgId)?.index.version;
    return held !== undefined && held < version;
  }

  /**
   * The organization's scope (its row, its users and the room's members tallied, whether the room
   * exists) for a lookup of `roomId` that arrived at `asOf` (a `performance.now()` reading), as read
   * with the changes its held index took in, for a room asked for (askScope): the latest read, if
   * it began after `asOf` or nothing that scope is read from has changed since it began; else the
   * read of the next update, waited for (at most `withinMs`, and only while nothing but this
   * organization's updates runs first). Under steady writes a lookup then waits for one read of
   * each version, which its index takes in too, where it read its scope and then waited for the
   * index's read (two round trips one after the other, and a read of the scope for each room).
   * Undefined when no index is held, its reads do not carry the room's scope (yet), or the wait
   * ran out: the lookup reads its scope itself.
   */
  async scopeAsOf(orgId: string, roomId: string, asOf: number, withinMs: number): Promise<DirectoryScope | undefined> {
    const changes = this.#scopeChanges;
    const held = this.#ready.get(orgId);
    if (changes === undefined || held?.scope?.scope.asked.has(roomId) !== true) return undefined;
    this.askScope(orgId, roomId);
    const key = jobKey({ kind: 'organization', orgId });
    const caughtUp = changes.catchUp(asOf);
    if (caughtUp !== undefined) {
      // The token moved since the latest read began (under steady writes, most often): that scope
      // will not do. An update queued now (when none is running) reads while the change listener
      // catches up (a round trip of its own on PostgreSQL), rather than after it.
      if (held.scope.readFrom < asOf && held.scope.token !== changes.token()) this.#enqueue({ kind: 'organization', orgId });
      await caughtUp;
    }
    const deadline = performance.now() + withinMs;
    // The update running began its read before `asOf`, most often: the one after it will do.
    for (let waited = 0; ; waited++) {
      const kept = this.#ready.get(orgId)?.scope;
      if (kept !== undefined && kept.scope.asked.has(roomId)) {
        if (kept.readFrom >= asOf) return kept.scope;
        const token = changes.token(asOf);
        if (token !== undefined && token === kept.token) return kept.scope;
      }
      const left = deadline - performance.now();
      if (waited === 2 || left <= 0 || !this.#ready.has(orgId)) return undefined;
      this.#enqueue({ kind: 'organization', orgId });
      const done = this.#done.get(key);
      // Not behind other loads, or a whole read of seconds.
      const first = this.#working?.kind === 'room' ? this.#queue[0] : this.#working;
      if (done === undefined || first === undefined || jobKey(first) !== key) return undefined;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([done.promise, new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
  }

  /**
   * Has the scope of lookups of the room (one that exists) read with the organization's changes
   * from its index's next update on, while the index stays held: the SCOPE_ROOMS rooms asked for
   * last, so a client asking for many rooms in turn pushes out no more than those.
   */
  askScope(orgId: string, roomId: string): void {
    const held = this.#ready.get(orgId);
    if (held === undefined) return;
    const rooms = (held.scopeRooms ??= []);
    const at = rooms.indexOf(roomId);
    if (at === rooms.length - 1 && at >= 0) return;
    if (at >= 0) rooms.splice(at, 1);
    rooms.push(roomId);
    if (rooms.length > SCOPE_ROOMS) rooms.shift();
  }

  /**
   * From now on, looks at the database's change token every `intervalMs`; when it moved, reads
   * the versions of the organizations held, and brings those that moved up to date in the
   * background, as a lookup at the new version would: an import's changes are then applied a
   * moment after it commits, before most lookups ask. While no lookup has asked for an index
   * for `idle.afterMs`, the versions are read at most every `idle.everyMs` (ASKED_LATELY_MS).
   */
  watch(
    changes: ChangeSource = NO_CHANGE_SOURCE,
    intervalMs = WATCH_MS,
    idle: { afterMs: number; everyMs: number } = { afterMs: ASKED_LATELY_MS, everyMs: WATCH_IDLE_MS },
  ): void {
    if (this.#policy.memoryBytes === 0 || this.#watch !== undefined || this.#closed) return;
    const versions = changes.about(['organizations']);
    // The tables of a lookup's scope, as SignatoryLookup's cache of scopes reads them.
    this.#scopeChanges = changes.about(LOOKUP_SCOPE_TABLES);
    this.#watch = setInterval(() => {
      if (this.#ready.size === 0 || this.#checking) return;
      const token = versions.token();
      const now = performance.now();
      if (now - this.#askedAt > idle.afterMs && now - this.#checkedAt < idle.everyMs) return;
      if ((token === undefined || token === this.#checkedToken) && now - this.#checkedAt < WATCH_WITHOUT_TOKEN_MS) return;
      this.#checkedToken = token;
      this.#checkedAt = now;
      void this.#checkVersions();
    }, intervalMs);
    this.#watch.unref();
  }

  async #checkVersions(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      for (const [orgId, version] of await this.#reads.versionsOf([...this.#ready.keys()])) {
        const ready = this.#ready.get(orgId);
        if (ready !== undefined && ready.index.version < version) this.#enqueue({ kind: 'organization', orgId });
      }
    } catch {
      // The database is unreachable: lookups ask again once it is back.
    } finally {
      this.#checking = false;
    }
  }

  /** Stops loading: the running load is cancelled, nothing else starts. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#watch);
    this.#queue.length = 0;
    await Promise.all([...this.#current].map((load) => load.cancel()));
    await this.#running;
    for (const done of this.#done.values()) done.resolve();
  }

  #enqueue(job: Job): void {
    if (this.#closed || this.#queued.has(jobKey(job))) return;
    const failedAt = this.#failedAt.get(job.orgId);
    if (failedAt !== undefined && Date.now() - failedAt < RETRY_AFTER_MS) return;
    this.#failedAt.delete(job.orgId);
    this.#queued.add(jobKey(job));
    let resolve!: () => void;
    const promise = new Promise<void>((done) => (resolve = done));
    this.#done.set(jobKey(job), { promise, resolve });
    // An index brought up to date goes before the largest rooms' reads queued (seconds each): lookups wait for it.
    const rooms = job.kind === 'organization' ? this.#queue.findIndex((queued) => queued.kind === 'rooms') : -1;
    if (rooms >= 0) this.#queue.splice(rooms, 0, job);
    else this.#queue.push(job);
    // The worker takes the job before its first wait, so #working is set from here on.
    if (this.#working === undefined) this.#running = this.#work();
  }

  /** Runs the queued jobs one after the other; it ends, in the same step as it finds the queue empty, so a job queued then starts another. */
  async #work(): Promise<void> {
    for (;;) {
      const job = this.#queue.shift();
      if (job === undefined || this.#closed) {
        this.#working = undefined;
        return;
      }
      this.#working = job;
      await this.#runJob(job, performance.now());
    }
  }

  /** Runs one job to its end; a failure is logged, and the organization not tried again for a while. */
  async #runJob(job: Job, started: number): Promise<void> {
    try {
      if (job.kind === 'organization') await this.#loadOrganization(job.orgId, started, false);
      else if (job.kind === 'rooms') await this.#loadLargestRooms(job.orgId, started);
      else await this.#loadRoom(job.orgId, job.roomId);
    } catch (error) {
      if (this.#closed) return;
      remember(this.#failedAt, job.orgId, Date.now());
      this.#log.warn({ err: error, organization: job.orgId }, 'search index: load failed; lookups use the database meanwhile');
    } finally {
      this.#queued.delete(jobKey(job));
      this.#done.get(jobKey(job))?.resolve();
      this.#done.delete(jobKey(job));
    }
  }

  /** Runs one load, to its end, until closing, or until it has run too long (it is then stopped, and rejects). */
  async #run(job: LoadJob): Promise<LoadResult> {
    const running = this.#load(job);
    this.#current.add(running);
    const timeoutMs = this.#policy.loadTimeoutMs ?? LOAD_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    let stopped: Promise<void> | undefined;
    const timedOut = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        stopped = running.cancel();
        reject(new Error(`the load took longer than ${timeoutMs} ms and was stopped`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([running.result, timedOut]);
    } catch (error) {
      // Only once the loading process is gone, so the next load never runs beside it; named as the timeout it was.
      if (stopped === undefined) throw error;
      await stopped;
      throw await timedOut.catch((timeout: unknown) => timeout);
    } finally {
      clearTimeout(timer);
      this.#current.delete(running);
    }
  }

  async #loadOrganization(orgId: string, started: number, whole: boolean): Promise<void> {
    const held = this.#ready.get(orgId);
    // The rooms of an index too far behind whose members were not replaced since, up to a version.
    let standing: StandingRooms | undefined;
    // Brought up to date from what changed, unless asked to read whole (a copy too far behind).
    if (held !== undefined && !whole) {
      const updated = await this.#update(orgId, held, started);
      if (updated === true || this.#closed) return;
      standing = updated;
      // To be read whole: the older index goes now, and its memory is free for the load.
      if (this.#ready.get(orgId) === held) this.#ready.delete(orgId);
    }
    const maxUsers = maxIndexedUsers(this.#policy);
    // Most organizations are small: their size, from the tallies, spares them a loading process.
    const size = await this.#reads.sizeOf(orgId);
    if (size === undefined || size.users < this.#policy.minUsers || size.users > maxUsers) {
      if (size !== undefined) remember(this.#skipped, orgId, size.version);
      return;
    }
    // With nothing held (after a restart, or once dropped), or what was held too far behind to be
    // brought up to date (an import changed many users, and left a copy: import-copies.ts),
    // the copy kept on disk of this state or an earlier one the database lists, newer than what was
    // held, brought up to date below: read here in about a second, where a loading process takes
    // seconds to read a million users. Never in place of a whole read asked for.
    const kept = whole ? undefined : await this.#reads.snapshotOf(orgId, size.version, held?.index.version ?? -1);
    const result: LoadResult =
      kept !== undefined
        ? { kind: 'index', parts: kept, fromSnapshot: true }
        : await this.#run({ kind: 'organization', orgId, minUsers: this.#policy.minUsers, maxUsers });
    if (this.#closed) return;
    // What is held is of an older version (or the same, read again): never to be used again. At the
    // same version its rooms' members stand as they are (users are numbered in seq order either way).
    const sameVersion = held !== undefined && this.#ready.get(orgId) === held && result.kind === 'index' && held.index.version === result.parts.version;
    const rooms = new Map(sameVersion ? held.rooms : []);
    this.#ready.delete(orgId);
    if (result.kind === 'skipped') remember(this.#skipped, orgId, result.version);
    if (result.kind !== 'index') return;
    // In an index of a version they are known to stand at: users added since are at its end (seq
    // order), and none is a member of a room not replaced. (A later import may have replaced them.)
    if (standing !== undefined && result.parts.version <= standing.upTo) {
      for (const [roomId, members] of roomsExtendedTo(standing.rooms, result.parts.seqs.length)) rooms.set(roomId, members);
    }
    // Room is made before the index is built, so what is dropped for it is let go before the build copies the keys.
    // Judged at the version the index is to answer at: a copy of an earlier one is brought up to it below.
    const version = result.fromSnapshot === true ? size.version : result.parts.version;
    const dropped = this.#dropped.get(orgId);
    const mayDrop = dropped?.version !== version;
    if (!this.#makeRoom(bytesOfParts(result.parts) + bytesOfRooms(rooms), orgId, mayDrop)) {
      if (mayDrop) remember(this.#skipped, orgId, version);
      return;
    }
    const index = this.#keep(orgId, result.parts, rooms);
    // The largest rooms' members, when none were held or some held are gone (replaced, or edited while the index was read whole).
    if (held === undefined || [...held.rooms.keys()].some((roomId) => !rooms.has(roomId))) this.#enqueue({ kind: 'rooms', orgId });
    this.#log.info(
      {
        organization: orgId,
        users: index.users,
        version: index.version,
        mib: Math.round(index.bytes / 2 ** 20),
        ms: Math.round(performance.now() - started),
        from: result.fromSnapshot === true ? 'its copy on disk' : 'the database',
      },
      'search index: loaded',
    );
    // Read whole after a copy too far behind: what changed since the read began is laid over it at
    // once, so it does not answer behind the version asked for.
    if (whole && !this.#closed) {
      const read = this.#ready.get(orgId);
      if (read !== undefined) await this.#update(orgId, read, started);
      return;
    }
    // A copy of an earlier version takes in what changed since, as any held index does; with too
    // many changes, the index is read whole after all.
    if (result.fromSnapshot === true && index.version < size.version) {
      const copied = this.#ready.get(orgId);
      if (copied === undefined || (await this.#update(orgId, copied, started)) === true || this.#closed) return;
      if (this.#ready.get(orgId) === copied) this.#ready.delete(orgId);
      await this.#loadOrganization(orgId, started, true);
    }
  }

  /**
   * Brings the held index of an organization up to its current version from the users changed
   * since (and the rooms' members not replaced since, kept): true once done (or nothing changed);
   * otherwise the index is to be read whole (too many changes, or changes it cannot place), and
   * what is returned are its rooms whose members were not replaced since, up to the version
   * this was read at (for an index read whole of that version or an earlier one to keep).
   */
  async #update(orgId: string, held: Ready, started: number): Promise<true | StandingRooms> {
    const none: StandingRooms = { rooms: new Map(), upTo: held.index.version };
    const maxChanges = MAX_LAID_OVER - held.index.changesLaidOver;
    if (maxChanges <= 0) return none;
    const token = this.#scopeChanges?.token();
    const readFrom = performance.now();
    const scopeRooms = [...(held.scopeRooms ?? [])];
    const result = await this.#reads.changesSince({ kind: 'changes', orgId, since: held.index.version, maxChanges, scopeRooms });
    if (this.#closed) return true;
    const scopeRead = 'scope' in result && result.scope !== undefined ? { readFrom, token, scope: result.scope } : held.scope;
    if (this.#ready.get(orgId) === held) held.scope = scopeRead;
    if (this.#ready.get(orgId) !== held || (result.kind !== 'changes' && result.kind !== 'many changes')) return none;
    // Rooms whose members an import replaced are read again; those edited member by member stand
    // only where the changed users are laid over them (below), not for a whole read.
    const replaced = new Set(result.rooms);
    const edited = new Set(result.editedRooms);
    const kept = [...held.rooms].filter(([roomId]) => !replaced.has(roomId));
    // Rooms held whose members an import replaced: read again, as after a whole read.
    if (kept.length < held.rooms.size) this.#enqueue({ kind: 'rooms', orgId });
    const standing: StandingRooms = { rooms: new Map(kept.filter(([roomId]) => !edited.has(roomId))), upTo: result.version };
    if (result.kind === 'many changes') return standing;
    if (result.version === held.index.version) return true;
    if (result.users > maxIndexedUsers(this.#policy)) return none;
    const laid = held.index.withChanges(result.version, result.users, result.changed);
    if (laid === undefined) return standing;
    // Many changes laid over make every update and search pay for them: merged in, in memory, in
    // steps between requests (below), or at once when those fell behind.
    const index = laid.changesLaidOver > COMPACT_AT_ONCE_AFTER ? laid.compacted() : laid;
    const rooms = roomsExtendedTo(new Map(kept), result.users);
    for (const roomId of edited) {
      const members = rooms.get(roomId);
      if (members === undefined) continue;
      // Each changed user is a member or not, as it is now: the members who came or went among them.
      rooms.set(roomId, members.withMembers(result.changed.map((user) => [index.userOf(user.seq), user.rooms?.includes(roomId) === true] as const)));
    }
    const update: LoggedUpdate = {
      from: held.index.version,
      to: result.version,
      changes: result.changed.map((user) => {
        const was = held.index.userOf(user.seq);
        return { before: was < 0 ? undefined : held.index.stateOf(was), after: stateOfChange(user) };
      }),
      seqs: new Set(result.changed.map((user) => user.seq)),
      memberships: new Map(result.changed.map((user) => [user.seq, user.rooms ?? []])),
      replacedRooms: replaced,
    };
    this.#ready.delete(orgId);
    if (!this.#makeRoom(bytesHeld({ index, rooms }), orgId)) {
      remember(this.#skipped, orgId, result.version);
      return true;
    }
    const updated: Ready = {
      index,
      rooms,
      log: logWith(held.log, update),
      scopeRooms: held.scopeRooms,
      scope: scopeRead,
      changedUsers: withChangedUsers(held.changedUsers, result.version, result.changed),
    };
    this.#hold(orgId, updated);
    if (held.pendingRooms !== undefined) this.#placePending(orgId, updated, held.pendingRooms);
    // Merged at once: the filters its merge could not carry.
    if (index !== laid) this.#filterInSteps(orgId, index);
    if (index.changesLaidOver > COMPACT_AFTER) this.#mergeInSteps(orgId, index);
    this.#log.info(
      {
        organization: orgId,
        users: index.users,
        version: index.version,
        changed: result.changed.length,
        laidOver: index.changesLaidOver,
        compacted: index !== laid,
        ms: Math.round(performance.now() - started),
      },
      'search index: updated with what changed',
    );
    return true;
  }

  /**
   * Merges the changes laid over an organization's held index into it (SearchIndex.compaction) a
   * few milliseconds at a time between turns of the event loop, while updates go on being laid
   * over the index held; then lays what those added over the merged index, which takes the held
   * one's place at the same version. Done at once, the merge held the request thread 50–250 ms at
   * a million users, once every 1,000 changes: under a sync of 500 users a second, every lookup
   * arriving meanwhile waited for it (docs/decisions.md, "Merging in steps").
   */
  #mergeInSteps(orgId: string, from: SearchIndex): void {
    if (this.#merging.has(orgId)) return;
    this.#merging.add(orgId);
    const started = performance.now();
    this.#inSteps(from.compaction())
      .then((merged) => {
        this.#merging.delete(orgId);
        if (merged !== undefined) this.#merged(orgId, from, merged, started);
      })
      .catch((error: unknown) => {
        this.#merging.delete(orgId);
        this.#log.warn({ err: error, organization: orgId }, 'search index: merge failed; the changes stay laid over');
      });
  }

  /** Makes the block filters of the organization's index (held) not made yet, in steps, while it stays held (see SearchIndex.filtering). */
  #filterInSteps(orgId: string, index: SearchIndex): void {
    const replaced = () => this.#ready.get(orgId)?.index.sharesBaseWith(index) !== true;
    this.#inSteps(index.filtering(), replaced).catch((error: unknown) =>
      this.#log.warn({ err: error, organization: orgId }, 'search index: filters not made; scans read every key'),
    );
  }

  /**
   * Runs the steps between requests, holding the thread MERGE_SLICE_MS at a time: their result, or
   * undefined once closing (or once `abandoned` says so).
   */
  #inSteps<T>(steps: Generator<undefined, T, undefined>, abandoned: () => boolean = () => false): Promise<T | undefined> {
    return new Promise((resolve, reject) => {
      const step = () => {
        try {
          const until = performance.now() + MERGE_SLICE_MS;
          for (;;) {
            if (this.#closed || abandoned()) {
              resolve(undefined);
              return;
            }
            const next = steps.next();
            if (next.done === true) {
              resolve(next.value);
              return;
            }
            if (performance.now() >= until) {
              setImmediate(step);
              return;
            }
          }
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      };
      setImmediate(step);
    });
  }

  /** A merge in steps is done: the held index, laid over the merged one, takes its own place (see #mergeInSteps). */
  #merged(orgId: string, from: SearchIndex, merged: SearchIndex, started: number): void {
    const held = this.#ready.get(orgId);
    const rebased = held?.index.rebasedOnto(merged, from);
    // Read whole or merged at once meanwhile, or dropped: the merge is of no use.
    if (held === undefined || rebased === undefined) return;
    // In place: the same version, answering alike, and an update under way (which checks that the
    // held entry is the one it began from) goes on from it.
    held.index = rebased;
    this.#filterInSteps(orgId, rebased);
    this.#log.info(
      {
        organization: orgId,
        users: rebased.users,
        version: rebased.version,
        merged: from.changesLaidOver,
        laidOver: rebased.changesLaidOver,
        ms: Math.round(performance.now() - started),
      },
      'search index: changes merged in',
    );
  }

  /** Builds the index from its parts and holds it, with the rooms' members known; the first one held warms the search code up. */
  #keep(orgId: string, parts: SearchIndexParts, rooms: Map<string, RoomMembers>): SearchIndex {
    const index = new SearchIndex(parts);
    releaseKeys(parts.keys);
    if (!this.#warm) warmUp(index);
    this.#warm = true;
    this.#hold(orgId, { index, rooms });
    this.#filterInSteps(orgId, index);
    return index;
  }

  /** Holds an organization's index (as the most recently used), no longer counted as dropped. */
  #hold(orgId: string, ready: Ready): void {
    this.#dropped.delete(orgId);
    this.#ready.set(orgId, ready);
  }

  /**
   * Reads the members of the organization's largest rooms not held (see PRELOADED_ROOMS_SHARE), in
   * a loading process, and holds them if the index is at the version they were read at (members of
   * a later version would answer lookups reading the index's).
   */
  async #loadLargestRooms(orgId: string, started: number): Promise<void> {
    const ready = this.#ready.get(orgId);
    if (ready === undefined) return;
    const budget = this.#policy.memoryBytes;
    const free = Math.min(budget * PRELOADED_ROOMS_SHARE, budget - this.#held());
    const maxRooms = Math.floor(free / Math.max(1, Math.ceil(ready.index.users / 8)));
    if (maxRooms <= 0) return;
    // Members read in all: no more than the organization's users, so this costs at most what a whole read of its index does.
    const result = await this.#run({
      kind: 'rooms',
      orgId,
      skip: [...ready.rooms.keys(), ...(ready.pendingRooms?.keys() ?? [])],
      maxRooms,
      maxMembers: ready.index.users,
    });
    // The index may have taken in changes since (or be behind the read): see #placeMembers.
    const now = this.#ready.get(orgId);
    if (result.kind !== 'rooms' || this.#closed || now === undefined) return;
    let at = 0;
    const held: string[] = [];
    for (const { roomId, members: count } of result.rooms) {
      const seqs = result.seqs.subarray(at, (at += count));
      if (now.rooms.has(roomId)) continue;
      const placed = this.#placeMembers(orgId, now, roomId, { version: result.version, seqs, mayDrop: false });
      if (placed === 'no room') break;
      if (placed === 'held') held.push(roomId);
    }
    this.#log.info(
      { organization: orgId, version: now.index.version, rooms: held.length, members: at, ms: Math.round(performance.now() - started) },
      "search index: the largest rooms' members read",
    );
  }

  async #loadRoom(orgId: string, roomId: string): Promise<void> {
    const result = await this.#run({ kind: 'room', orgId, roomId });
    const ready = this.#ready.get(orgId);
    if (result.kind !== 'members' || this.#closed || ready === undefined) return;
    this.#placeMembers(orgId, ready, roomId, { version: result.version, seqs: result.seqs, mayDrop: true });
  }

  /**
   * Holds a room's members read at some version in the organization's index, brought to the
   * index's version (#membersAt), or kept pending until the index reaches theirs. Under steady
   * writes a read of a large room's members (seconds) never ends at the version the index is at,
   * and the index cannot move while the read runs (one job at a time): members were read again and
   * again, while the index's updates queued behind the reads and lookups went to the database.
   * 'dropped': they cannot be brought to the index's version (its log does not reach back, or an
   * import replaced the room's members since); 'no room': not within the memory budget.
   */
  #placeMembers(orgId: string, ready: Ready, roomId: string, read: PendingMembers): 'held' | 'pending' | 'dropped' | 'no room' {
    if (ready.rooms.has(roomId)) return 'held';
    if (read.version > ready.index.version) {
      // A view into the largest rooms' one array would keep it whole: a copy then (once: kept pending, it is its own).
      const seqs = read.seqs.byteLength === read.seqs.buffer.byteLength ? read.seqs : read.seqs.slice();
      (ready.pendingRooms ??= new Map()).set(roomId, { ...read, seqs });
      return 'pending';
    }
    const members = this.#membersAt(ready, roomId, read);
    if (members === undefined) return 'dropped';
    if (!this.#makeRoom(members.bytes, orgId, read.mayDrop)) return 'no room';
    ready.rooms.set(roomId, members);
    return 'held';
  }

  /** Places the members read ahead of an index that has since been brought up to date; those still ahead stay pending (not counted in the memory budget meanwhile: one update away). */
  #placePending(orgId: string, ready: Ready, pending: ReadonlyMap<string, PendingMembers>): void {
    for (const [roomId, read] of pending) this.#placeMembers(orgId, ready, roomId, read);
  }

  /**
   * The room's members read at `read.version`, as they are at the index's version: the users its
   * log says changed since, each a member or not as it is now. Undefined when the log does not
   * reach back that far or an import replaced the room's members since.
   */
  #membersAt(ready: Ready, roomId: string, read: PendingMembers): RoomMembers | undefined {
    const { index } = ready;
    const now = new Map<number, boolean>();
    let at = index.version;
    for (let link = ready.log; link !== undefined && at > read.version; link = link.earlier) {
      const update = link.update;
      if (update.to !== at || update.replacedRooms.has(roomId)) return undefined;
      // Newest first: a user changed again later is as the later update left it.
      for (const [seq, rooms] of update.memberships) if (!now.has(seq)) now.set(seq, rooms.includes(roomId));
      at = update.from;
    }
    if (at > read.version) return undefined;
    const members = index.roomMembers(read.seqs);
    return now.size === 0 ? members : members?.withMembers([...now].map(([seq, member]) => [index.userOf(seq), member] as const));
  }

  /** Bytes the indexes and room members held take. */
  #held(): number {
    let held = 0;
    for (const ready of this.#ready.values()) held += bytesHeld(ready);
    return held;
  }

  /**
   * Makes room for `bytes` more, dropping the least recently used indexes of other organizations
   * if `mayDrop`; false, with nothing dropped, if that would not be enough.
   */
  #makeRoom(bytes: number, orgId: string, mayDrop = true): boolean {
    const budget = this.#policy.memoryBytes;
    let held = this.#held();
    if (held + bytes <= budget) return true;
    if (!mayDrop) return false;
    const victims: [string, Ready][] = [];
    for (const [other, ready] of this.#ready) {
      if (held + bytes <= budget) break;
      if (other === orgId) continue;
      victims.push([other, ready]);
      held -= bytesHeld(ready);
    }
    if (held + bytes > budget) return false;
    for (const [other, ready] of victims) {
      this.#ready.delete(other);
      remember(this.#dropped, other, { version: ready.index.version, bytes: bytesHeld(ready) });
      this.#log.info(
        { organization: other, version: ready.index.version },
        'search index: dropped to make room; lookups use the database until there is room again or its directory changes',
      );
    }
    return true;
  }
}
