/**
 * An organization's users held in memory for searching, at one directory
 * version: every folded search key in a few large strings, each user's kind, and
 * where each user stands in every sort order (as the database orders them). A
 * term is found by scanning the strings, so its exact count and any page cost the
 * same for every term and every offset: no per-match row read, no sort. Pure:
 * a builder is fed what the database reads; src/search-index/search-indexes.ts
 * loads and keeps them.
 */
import { LruCache } from '../lib/lru-cache.ts';
import { SEARCH_KEY_SEPARATOR } from './fold.ts';
import { filterNeedsMembers, matchesFilter, sortKeyOrder, SORT_FIELDS, type SignatoryFilter, type SortDirection, type SortField } from './signatory-rules.ts';

/** Ends every search key in the buffer: no stored key contains U+0000, so no term can match across two users. */
const END_OF_KEY = 0;

/**
 * Beyond one candidate in this many users, a further term is scanned for, not checked user by user:
 * that dense, one scan of the keys costs less than checking each candidate.
 */
const DENSE = 4;

/**
 * Below one member in this many users, a filter on a room's members checks each member's key
 * rather than scan from one member's key to the next: a look at a key in code costs about what
 * the native scan of this many keys does.
 */
const FEW_MEMBERS = 32;

/**
 * Up to this many matches, a page may be picked from them by their places rather than found by
 * walking the order: the cheaper by estimate is taken (see WALK_STEP_COST), and a walk that runs
 * past the pick's cost (matches bunched far from where it starts: a term in the field sorted by)
 * stops, and the page is picked.
 */
const SORT_UP_TO = 50_000;

/**
 * A step of the walk to a page (a call to test the user, the changes laid over passed) is taken to
 * cost this many of the steps a pick of the page from the matches is estimated at (matches ×
 * log2(offset + size + 1)), a cautious figure: a walk of 196,000 steps took 61 ms under a SCIM sync
 * at a million users (300 ns a step, on a loaded machine), a pick of 20 among 44,510 matches
 * 114 µs on a quiet one (0.6 ns an estimated step, about as long again to make the values it
 * picks from). So the first page of spread matches is still walked to (`mul`: about 450 steps,
 * against a budget of 3,000), and one of matches bunched elsewhere is picked after at most that.
 */
const WALK_STEP_COST = 64;

/**
 * The users of the base whose key contains a term are kept, by term, while they are at most one
 * user in this many (or KEPT_MATCHES_ANYWAY), within BASE_MATCHES_BYTES: the base never changes, so a search at a later
 * version (under steady writes, every few milliseconds) reads them rather than every key again.
 */
const KEPT_MATCHES_SHARE = 8;
/**
 * A further term's kept matches are read rather than each key left looked at while they are at
 * most this many times the keys left: reading one costs a few array steps, a look at a key a
 * comparison of its bytes.
 */
const KEPT_READ_COST = 16;
/** As many matches are kept whatever the share (16 KiB). */
const KEPT_MATCHES_ANYWAY = 4096;
const BASE_MATCHES_BYTES = 16 * 1024 * 1024;
/**
 * At most this many terms' matches are carried into a merged index (the most recently used): each
 * costs a look at every change merged (1,000 or more), and a cache full of one-off terms holds
 * hundreds of thousands.
 */
const CARRIED_TERMS = 256;

/** Bits of a user's kind. */
const EXTERNAL = 1;
const NEEDS_INVITE = 2;
const ROOM_MEMBER = 4;
/** Suspended or deleted: kept in the index so a change of status is laid over it, never a candidate. */
const NOT_CANDIDATE = 8;

/** A user as the index is built from it: in ascending `seq` order. */
export interface IndexedUser {
  seq: number;
  searchKey: string;
  external: boolean;
  needsInvite: boolean;
  /** False for a suspended or deleted user. */
  candidate: boolean;
}

/** The kind bits of a user. */
function kindOf(user: IndexedUser): number {
  return (user.external ? EXTERNAL : 0) | (user.needsInvite ? NEEDS_INVITE : 0) | (user.candidate ? 0 : NOT_CANDIDATE);
}

/**
 * A user whose keys or kind changed since an index's version, or who is new, as the database
 * holds it now: with what places it in each sort order (the folded keys, then the id).
 */
export interface ChangedUser extends IndexedUser {
  id: string;
  sortKeys: Record<SortField, string>;
  /** The rooms the user is a member of now, all of them (as the directory's change reads find them). */
  rooms?: readonly string[];
  /** The fields a lookup shows of the user, as they are now. */
  shown?: { firstname: string | null; lastname: string | null; email: string };
}

/** The room's members among the indexed users, one bit each. */
export class RoomMembers {
  readonly #bits: Uint8Array;
  #size: number | undefined;

  constructor(bits: Uint8Array) {
    this.#bits = bits;
  }

  has(user: number): boolean {
    return (this.#bits[user >> 3]! & (1 << (user & 7))) !== 0;
  }

  get bytes(): number {
    return this.#bits.byteLength;
  }

  /** How many members (counted once: the bits never change). */
  get size(): number {
    if (this.#size === undefined) {
      let size = 0;
      for (let user = this.next(0); user >= 0; user = this.next(user + 1)) size += 1;
      this.#size = size;
    }
    return this.#size;
  }

  /** The first member from `from` on, or -1: a byte without members costs one read. */
  next(from: number): number {
    const bits = this.#bits;
    let at = from >> 3;
    if (at >= bits.length) return -1;
    let byte = bits[at]! & (0xff << (from & 7));
    while (byte === 0) {
      if (++at >= bits.length) return -1;
      byte = bits[at]!;
    }
    return (at << 3) | (31 - Math.clz32(byte & -byte));
  }

  /** These members with each of `changes` ([user, member?]) made: a copy, when anything changes. */
  withMembers(changes: readonly (readonly [number, boolean])[]): RoomMembers {
    const wanted = changes.filter(([user, member]) => this.has(user) !== member);
    if (wanted.length === 0) return this;
    let size = this.#bits.byteLength;
    for (const [user] of wanted) size = Math.max(size, (user >> 3) + 1);
    const bits = new Uint8Array(size);
    bits.set(this.#bits);
    for (const [user, member] of wanted) {
      if (member) bits[user >> 3]! |= 1 << (user & 7);
      else bits[user >> 3]! &= ~(1 << (user & 7));
    }
    return new RoomMembers(bits);
  }

  /** The same members among `users` users: users added since are at the end, and none of them is a member (shared when the bits already reach). */
  extendedTo(users: number): RoomMembers {
    if (Math.ceil(users / 8) <= this.#bits.byteLength) return this;
    const bits = new Uint8Array(Math.ceil(users / 8));
    bits.set(this.#bits.subarray(0, bits.byteLength));
    return new RoomMembers(bits);
  }
}

/** What a search asks: terms, who may match, and which page in which order. */
export interface IndexSearch {
  terms: readonly string[];
  includeExternal: boolean;
  filter: SignatoryFilter;
  /** Required when the filter depends on room membership. */
  members?: RoomMembers | undefined;
  sortBy: SortField;
  direction: SortDirection;
  offset: number;
  size: number;
}

/** What an index is made of: plain typed arrays, which a loading process can send as they are. */
export interface SearchIndexParts {
  version: number;
  /** Every user's search key, each ended by U+0000, in ascending seq order (UTF-8). */
  keys: Uint8Array;
  /** Where each user's key starts in `keys`; one more entry, the end. */
  starts: Int32Array;
  /** Each user's kind: bit 1 external, bit 2 needs an invitation. */
  kinds: Uint8Array;
  /** Ascending: a user's number is its place here. */
  seqs: Float64Array;
  /** The users' numbers in each sort order, ascending. */
  orders: Record<SortField, Int32Array>;
}

/** The arrays of the parts, in one fixed order (as they are written to a file and read back). */
export function arraysOfParts(parts: SearchIndexParts): ArrayBufferView[] {
  return [parts.keys, parts.starts, parts.kinds, parts.seqs, parts.orders.lastname, parts.orders.firstname, parts.orders.email];
}

/** Parts of `users` users with `keyBytes` bytes of keys, every array zeroed: to be filled (from a file). */
export function emptyParts(version: number, users: number, keyBytes: number): SearchIndexParts {
  return {
    version,
    keys: new Uint8Array(keyBytes),
    starts: new Int32Array(users + 1),
    kinds: new Uint8Array(users),
    seqs: new Float64Array(users),
    orders: { lastname: new Int32Array(users), firstname: new Int32Array(users), email: new Int32Array(users) },
  };
}

/** Bytes of the arrays of parts of `users` users with `keyBytes` bytes of keys (what emptyParts allocates). */
export function partsBytes(users: number, keyBytes: number): number {
  return keyBytes + (users + 1) * 4 + users + users * 8 + 3 * users * 4;
}

/** Memory an index built from these parts holds, in bytes (its keys as a string of one byte per character, each order and its inverse). */
export function bytesOfParts(parts: SearchIndexParts): number {
  const { keys, starts, kinds, seqs, orders } = parts;
  return (
    keys.byteLength +
    starts.byteLength +
    kinds.byteLength +
    seqs.byteLength +
    2 * (orders.lastname.byteLength + orders.firstname.byteLength + orders.email.byteLength) +
    filterBytes(seqs.length)
  );
}

/**
 * Users' worth of work a merge does between the points it may pause at (see SearchIndex.compaction).
 * Each step of a loop over the orders reads or writes somewhere in a 4 MB array: 65,536 of them
 * took 8-23 ms here, so a quarter. A step that allocates one of the merge's arrays may still take
 * 10-30 ms when the allocation sets off a collection.
 */
const MERGE_STEP = 16_384;
/**
 * A base holds its keys in segments of 2^SEGMENT_SHIFT users (65,536: about 3 MB of keys each),
 * user `user` in segment `user >>> shift`. A merge joins anew only the segments its changes touch
 * (appended users: the last), each between two pauses: one string of every key (47 MB at a million
 * users) took 25-55 ms to join here, on the request thread, at every merge. (Tests set smaller
 * segments, so that a few users span several.)
 */
const SEGMENT_SHIFT = 16;

/** A power of two's exponent given as an option, if it numbers users as an Int32Array can (0 to 30); a RangeError otherwise. */
function checkedShift(name: string, shift: number): number {
  if (!Number.isInteger(shift) || shift < 0 || shift > 30) throw new RangeError(`${name} ${shift}: an integer from 0 to 30`);
  return shift;
}

/** Runs steps that may pause (see SearchIndex.compaction) to their end, at once. */
function finished<T>(steps: Generator<undefined, T, undefined>): T {
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/**
 * An order of `users` users: the base order without the users `overlay` passes over, each change inserted
 * before the place it goes before (as #page walks it); pauses every MERGE_STEP places.
 */
function* mergedOrder(
  order: Int32Array,
  inserts: { before: Int32Array; users: Int32Array },
  overlay: Overlay,
  users: number,
): Generator<undefined, Int32Array, undefined> {
  const merged = new Int32Array(users);
  let at = 0;
  let next = 0;
  for (let place = 0; place <= order.length; place++) {
    while (next < inserts.before.length && inserts.before[next] === place) merged[at++] = inserts.users[next++]!;
    if (place < order.length && !passesOver(overlay, order[place]!)) merged[at++] = order[place]!;
    if (place % MERGE_STEP === MERGE_STEP - 1) yield;
  }
  return merged;
}

/** Each user's place in the order; pauses every MERGE_STEP places. */
function* placesIn(order: Int32Array): Generator<undefined, Int32Array, undefined> {
  const places = new Int32Array(order.length);
  for (let from = 0; from < order.length; from += MERGE_STEP) {
    const to = Math.min(order.length, from + MERGE_STEP);
    for (let place = from; place < to; place++) places[order[place]!] = place;
    yield;
  }
  return places;
}

/** What a whole read of the database gave (or a merge made): the keys as one-byte strings, the rest as read. */
interface Base {
  /**
   * The keys' UTF-8 bytes, one character per byte (one-byte strings of the same length): byte-wise
   * substring search is then String#indexOf, whose calls cost much less than Buffer#indexOf's. In
   * segments of 2^`shift` users (see SEGMENT_SHIFT).
   */
  keys: readonly string[];
  shift: number;
  /** Where each user's key starts in the keys as if they were joined (its segment's string starts at its first user's); one more entry, the end. */
  starts: Int32Array;
  kinds: Uint8Array;
  seqs: Float64Array;
  orders: Readonly<Record<SortField, Int32Array>>;
  /** Each user's place in each order (the orders inverted): a few matches are sorted by it, not found by walking the order. */
  places: Readonly<Record<SortField, Int32Array>>;
  /** How often each byte value occurs in the keys (sampled): a term is searched for from its rarest byte. */
  byteCounts: Uint32Array;
  /**
   * Each segment's block filters (see blockFilters): a scan for a term passes over the blocks
   * that lack one of its byte triples. Undefined until made: after a whole read, by `filtering()`
   * (in steps); by a merge, from the base's (where the base had them) with the changes' added, or
   * for a segment of new users only; the others by `filtering()` of the merged base. Filled in
   * place: a scan of a segment without them reads the whole segment.
   */
  filters: (Int32Array | undefined)[];
  /** Users per block of the filters, as a power of two (see FILTER_BLOCK_SHIFT). */
  blockShift: number;
  bytes: number;
  /** The base users whose key contains a term, in ascending order, by term; 'many' when too many to keep (see KEPT_MATCHES_SHARE). */
  matches: LruCache<string, Int32Array | 'many'>;
  /** 1 for each held user changed since the base: the one array every overlay of the base shares (see flagPassedOver). */
  passedOver?: Uint8Array;
}

/**
 * The users changed since the base was read, laid over it: their keys (as the base holds its own),
 * their kinds, and where each goes in every order. The base's own entries for them are passed over.
 */
interface Overlay {
  /** Every change since the base's version, in ascending seq order. */
  changes: readonly ChangedUser[];
  /** Each change's user number: a held user keeps its own, a new one follows the held. */
  users: Int32Array;
  keys: string;
  starts: Int32Array;
  /** Each change's sort keys (as bytes) and where it goes in each base order: carried to the next update, which places only what is new. */
  placements: readonly Placement[];
  /** The base's flags of the held users changed since it (its `passedOver`, see flagPassedOver): the overlay passes over the base entries of those among its changes (passesOver). */
  passedOver: Uint8Array;
  /**
   * Each change's kind: a changed user's kind is read here (see #kinds), the base's kinds never
   * change. Copying a million kinds whenever a change made one differ (a user suspended) cost more
   * than the rest of the update, and as much memory to collect each time (docs/decisions.md, "An
   * update of a held index lays over only what is new").
   */
  kinds: Uint8Array;
  /** The seqs of the new users, after the held ones'. */
  addedSeqs: Float64Array;
  /** For each order: changed users, by their place (then in order), and the place in the base order each goes before. */
  inserts: Record<SortField, { before: Int32Array; users: Int32Array }>;
  bytes: number;
}

/** A change's sort keys as bytes, and, once found, the base place it goes before in each order (the base never changes). */
interface Placement {
  keys: Record<SortField | 'id', string>;
  before: Partial<Record<SortField, number>>;
  /** Its search key as the index holds it (bytes, ended). */
  searchKey: string;
}

function placementOf(change: ChangedUser): Placement {
  return {
    keys: {
      lastname: asBytes(change.sortKeys.lastname),
      firstname: asBytes(change.sortKeys.firstname),
      email: asBytes(change.sortKeys.email),
      id: asBytes(change.id),
    },
    before: {},
    searchKey: asBytes(change.searchKey) + '\0',
  };
}

/**
 * The changes laid over before (`previous`), each replaced by its user's change among `changed`,
 * with the other new ones, in ascending seq order; each one's user number (a held user keeps
 * its own, a new one follows the held and those added before); the places of those from
 * `changed` (`fresh`); and for each change the place in `previous` it is carried from, or -1
 * (`carried`). Undefined when they cannot be laid over exactly: a seq neither held nor after every
 * one held, a new user numbered otherwise than before, or a count other than `users`.
 */
function mergedChanges(
  previous: Overlay | undefined,
  changed: readonly ChangedUser[],
  heldSeqs: Float64Array,
  users: number,
): { changes: ChangedUser[]; numbers: Int32Array; addedSeqs: number[]; fresh: number[]; carried: Int32Array } | undefined {
  const held = heldSeqs.length;
  // The latest change of each user, in ascending seq order.
  const bySeq = new Map<number, ChangedUser>();
  for (const user of changed) bySeq.set(user.seq, user);
  const incoming = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  const earlier = previous?.changes ?? [];
  const changes: ChangedUser[] = [];
  const numbers = new Int32Array(earlier.length + incoming.length);
  const carried = new Int32Array(earlier.length + incoming.length);
  const addedSeqs: number[] = [];
  const fresh: number[] = [];
  let e = 0;
  let i = 0;
  while (e < earlier.length || i < incoming.length) {
    const fromEarlier = i >= incoming.length || (e < earlier.length && earlier[e]!.seq < incoming[i]!.seq);
    let user: number;
    const k = changes.length;
    if (fromEarlier) {
      changes.push(earlier[e]!);
      carried[k] = e;
      user = previous!.users[e++]!;
    } else {
      const change = incoming[i++]!;
      if (e < earlier.length && earlier[e]!.seq === change.seq) user = previous!.users[e++]!;
      else user = placeOf(heldSeqs, change.seq);
      changes.push(change);
      carried[k] = -1;
      fresh.push(k);
    }
    if (user < 0 || user >= held) {
      const seq = changes[k]!.seq;
      if (!(seq > (addedSeqs.at(-1) ?? (held > 0 ? heldSeqs[held - 1]! : -Infinity)))) return undefined;
      const number = held + addedSeqs.push(seq) - 1;
      // A new user keeps the number it was laid over with: rooms' members held are by number.
      if (user >= held && user !== number) return undefined;
      user = number;
    }
    numbers[k] = user;
  }
  if (held + addedSeqs.length !== users) return undefined;
  return { changes, numbers: numbers.subarray(0, changes.length), addedSeqs, fresh, carried: carried.subarray(0, changes.length) };
}

/**
 * The changes' search keys joined, and where each starts (one more entry, the end): runs of
 * changes carried from `previous` in a row are one slice of its keys, so an update pays for the
 * keys of its own changes, not for those of every change laid over before.
 */
function joinedKeys(previous: Overlay | undefined, placements: readonly Placement[], carried: Int32Array): { keys: string; starts: Int32Array } {
  const count = placements.length;
  const starts = new Int32Array(count + 1);
  const pieces: string[] = [];
  let k = 0;
  while (k < count) {
    const from = carried[k]!;
    if (from < 0) {
      const key = placements[k]!.searchKey;
      pieces.push(key);
      starts[k + 1] = starts[k]! + key.length;
      k += 1;
      continue;
    }
    // A run of changes carried from consecutive places of `previous`: one slice, its starts shifted.
    let to = k + 1;
    while (to < count && carried[to] === carried[to - 1]! + 1) to += 1;
    const earlier = previous!.starts;
    const shift = starts[k]! - earlier[from]!;
    for (let j = k + 1; j <= to; j++) starts[j] = earlier[from + (j - k)]! + shift;
    pieces.push(previous!.keys.slice(earlier[from], earlier[from + (to - k)]));
    k = to;
  }
  return { keys: pieces.join(''), starts };
}

/** The place in `changes` of a changed user's number (they ascend with the changes' seqs), or -1. */
function changeOf(overlay: Overlay, user: number): number {
  return placeOf(overlay.users, user);
}

/**
 * Flags the held users of the `fresh` changes in the base's one array of flags, which all its
 * overlays share, and returns that array. A user once changed is among the changes of every later overlay of
 * the base (each lays its changes over the one before, and all read the changes since the base's
 * version), so a flag is set once and never cleared, and an overlay passes over the flagged users
 * that are among its own changes (passesOver): an older overlay, still answering, is not misled by
 * the flags of a newer one. Before, each version that first changed a held user copied a byte for
 * every held user (1 MB at a million): renames of held users cost 121–157 µs an update against
 * 51–60 for new users (bench:index-updates --held, docs/benchmarks.md).
 */
function flagPassedOver(base: Base, fresh: readonly number[], numbers: Int32Array): Uint8Array {
  const held = base.seqs.length;
  const flags = (base.passedOver ??= new Uint8Array(held));
  for (const k of fresh) {
    const user = numbers[k]!;
    if (user < held) flags[user] = 1;
  }
  return flags;
}

/** Whether `overlay` passes over held user `user`'s base entry: flagged, and among the overlay's own changes (see flagPassedOver). */
function passesOver(overlay: Overlay, user: number): boolean {
  return overlay.passedOver[user] === 1 && changeOf(overlay, user) >= 0;
}

export class SearchIndex {
  readonly version: number;
  /** Memory held, in bytes. */
  readonly bytes: number;
  readonly #base: Base;
  readonly #overlay: Overlay | undefined;

  /** An index of the parts; `segmentShift`: its keys in segments of 2^segmentShift users (see SEGMENT_SHIFT); `filterBlockShift`: its filters by blocks of 2^filterBlockShift users (see FILTER_BLOCK_SHIFT). */
  constructor(parts: SearchIndexParts, options?: { segmentShift?: number; filterBlockShift?: number });
  constructor(base: Base, version: number, overlay?: Overlay);
  constructor(parts: SearchIndexParts | Base, second?: number | { segmentShift?: number; filterBlockShift?: number }, overlay?: Overlay) {
    if (typeof second === 'number') {
      const version = second;
      this.#base = parts as Base;
      this.version = version;
      this.#overlay = overlay;
      this.bytes = this.#base.bytes + (overlay?.bytes ?? 0);
      return;
    }
    const { keys, starts, kinds, seqs, orders } = parts as SearchIndexParts;
    this.version = (parts as SearchIndexParts).version;
    const bytes = bytesOfParts(parts as SearchIndexParts);
    const places = { lastname: finished(placesIn(orders.lastname)), firstname: finished(placesIn(orders.firstname)), email: finished(placesIn(orders.email)) };
    const shift = checkedShift('segmentShift', second?.segmentShift ?? SEGMENT_SHIFT);
    const blockShift = checkedShift('filterBlockShift', second?.filterBlockShift ?? FILTER_BLOCK_SHIFT);
    const segments: string[] = [];
    for (let first = 0; first < seqs.length; first += 1 << shift) {
      const from = starts[first]!;
      const to = starts[Math.min(seqs.length, first + (1 << shift))]!;
      segments.push(Buffer.from(keys.buffer, keys.byteOffset + from, to - from).toString('latin1'));
    }
    const filters = segments.map(() => undefined);
    this.#base = {
      keys: segments,
      shift,
      starts,
      kinds,
      seqs,
      orders,
      places,
      byteCounts: byteCountsOf(segments),
      filters,
      blockShift,
      bytes,
      matches: baseMatches(),
    };
    this.bytes = bytes;
  }

  get users(): number {
    return this.#base.seqs.length + (this.#overlay?.addedSeqs.length ?? 0);
  }

  /** How many users' changes are laid over what was read whole. */
  get changesLaidOver(): number {
    return this.#overlay?.changes.length ?? 0;
  }

  /** The user number of a seq, or -1 when no indexed user has it. */
  userOf(seq: number): number {
    const held = placeOf(this.#base.seqs, seq);
    if (held >= 0 || this.#overlay === undefined) return held;
    const added = placeOf(this.#overlay.addedSeqs, seq);
    return added < 0 ? -1 : this.#base.seqs.length + added;
  }

  /** What a lookup tests of a held user: its search key (as bytes) and kind. */
  stateOf(user: number): UserState {
    const overlay = this.#overlay;
    // A changed (or new) user is among the changes; any other is the base's.
    const change = overlay === undefined ? -1 : changeOf(overlay, user);
    if (change >= 0) return { key: overlay!.keys.slice(overlay!.starts[change], overlay!.starts[change + 1]! - 1), kind: overlay!.kinds[change]! };
    const { text, from, end } = baseKeyOf(this.#base, user);
    return { key: text.slice(from, end), kind: this.#base.kinds[user]! };
  }

  #seqOf(user: number): number {
    const held = this.#base.seqs.length;
    return user < held ? this.#base.seqs[user]! : this.#overlay!.addedSeqs[user - held]!;
  }

  /** The members of a room, from their seqs; undefined when one is not an indexed user (the index is not of the same version). */
  roomMembers(seqs: Iterable<number>): RoomMembers | undefined {
    const bits = new Uint8Array(Math.ceil(this.users / 8));
    for (const seq of seqs) {
      const user = this.userOf(seq);
      if (user < 0) return undefined;
      bits[user >> 3]! |= 1 << (user & 7);
    }
    return new RoomMembers(bits);
  }

  /**
   * This index at `version`, with `changed` (ascending seq) laid over it: each either a user held
   * here, whose key and kind are replaced and who takes a new place in each order, or a new user
   * after every held one. The large arrays are shared, not copied: the cost grows with the changes
   * (changes laid over an index before are carried, the base stays). Undefined when that cannot be
   * done exactly (a seq out of place, a count that does not add up to `users`, or a place the keys
   * here cannot decide): the index is then read whole.
   */
  withChanges(version: number, users: number, changed: readonly ChangedUser[]): SearchIndex | undefined {
    const base = this.#base;
    const previous = this.#overlay;
    const laid = mergedChanges(previous, changed, base.seqs, users);
    if (laid === undefined) return undefined;
    const { changes, numbers, addedSeqs, fresh, carried } = laid;

    // Placements of changes laid over before are carried (same base): only the new ones are made.
    const placements = changes.map((change, k) => (carried[k]! >= 0 ? previous!.placements[carried[k]!]! : placementOf(change)));
    const { keys, starts } = joinedKeys(previous, placements, carried);

    // The arrays of a user each are shared with the index laid over before while they stay as they were.
    const flags = flagPassedOver(base, fresh, numbers);
    // Passed over by the index made here: flagged (by this update or one before) and among its changes.
    const passedOver = (user: number) => flags[user] === 1 && placeOf(numbers, user) >= 0;
    const kinds = new Uint8Array(changes.length);
    for (let k = 0; k < changes.length; k++) kinds[k] = carried[k]! >= 0 ? previous!.kinds[carried[k]!]! : kindOf(changes[k]!);

    const inserts = {} as Overlay['inserts'];
    const superseded = new Set<number>();
    for (const k of fresh) superseded.add(numbers[k]!);
    for (const field of SORT_FIELDS) {
      const placed = this.#placeInBase(field, fresh, placements, numbers, passedOver, previous, superseded);
      if (placed === undefined) return undefined;
      inserts[field] = placed;
    }
    // The changes themselves (objects of five short strings) and their placements, about 400 bytes each.
    // Kinds still the base's own are counted with the base.
    const overlayBytes =
      starts[changes.length]! +
      starts.byteLength +
      numbers.byteLength +
      flags.byteLength +
      kinds.byteLength +
      8 * addedSeqs.length +
      3 * 8 * changes.length +
      400 * changes.length;
    return new SearchIndex(base, version, {
      changes,
      users: numbers,
      keys,
      starts,
      placements,
      passedOver: flags,
      kinds,
      addedSeqs: Float64Array.from(addedSeqs),
      inserts,
      bytes: overlayBytes,
    });
  }

  /**
   * This index with its changes merged into what they are laid over: the same users under the same
   * numbers (rooms' members held stand), answering alike, with nothing laid over. Copies every
   * array once, in memory, where reading the index whole again takes a loading process seconds of
   * the database's time.
   */
  compacted(): SearchIndex {
    return finished(this.compaction());
  }

  /** Whether this index is laid over the same base as `other` (one's `filtering()` serves the other). */
  sharesBaseWith(other: SearchIndex): boolean {
    return this.#base === other.#base;
  }

  /**
   * Makes the base's block filters not made yet, in steps (as compaction's): after a whole read
   * or a merge (280-800 ms at a million users here; a scan meanwhile reads whole segments).
   */
  *filtering(): Generator<undefined, void, undefined> {
    const base = this.#base;
    for (let segment = 0; segment < base.keys.length; segment++) {
      if (base.filters[segment] !== undefined) continue;
      const first = segment << base.shift;
      const end = Math.min(base.seqs.length, first + (1 << base.shift));
      base.filters[segment] = yield* blockFilters(base.keys[segment]!, base.starts, first, end, base.blockShift);
    }
  }

  /**
   * compacted(), in steps: pauses (yields) after each MERGE_STEP users' worth of work, so a server
   * merges between requests rather than hold its thread 100-280 ms at a million users
   * (search-indexes.ts); a segment of keys a change touches (see SEGMENT_SHIFT) is copied and joined
   * whole between two pauses (65,536 users, about 3 MB: 1-3 ms here). Every array it reads stays as it is meanwhile (indexes
   * laid over this one share them but never write where this one reads), so later indexes go on
   * being laid over this one while it runs; `rebasedOnto` then lays what they added over the result.
   */
  *compaction(): Generator<undefined, SearchIndex, undefined> {
    const overlay = this.#overlay;
    if (overlay === undefined) return this;
    const base = this.#base;
    const held = base.seqs.length;
    const users = this.users;
    // Keys, segment by segment: a segment no change touches is the base's own; any other is joined
    // anew from the base's runs between changed users and each changed (or new) user's own key.
    const keys: string[] = [];
    const filters: (Int32Array | undefined)[] = [];
    const changedKeys = Buffer.from(overlay.keys, 'latin1');
    const starts = new Int32Array(users + 1);
    let at = 0;
    let k = 0;
    const shift = base.shift;
    for (let first = 0; first < users; first += 1 << shift) {
      const end = Math.min(users, first + (1 << shift));
      const touched = k < overlay.users.length && overlay.users[k]! < end;
      if (!touched) {
        // Only held users: a new one would be a change.
        const moved = at - base.starts[first]!;
        for (let user = first; user < end; user++) {
          starts[user] = base.starts[user]! + moved;
          if (user % MERGE_STEP === MERGE_STEP - 1) yield;
        }
        const segment = base.keys[first >>> shift]!;
        keys.push(segment);
        filters.push(base.filters[first >>> shift]);
        at += segment.length;
        continue;
      }
      const pieces: string[] = [];
      const origin = first < held ? base.starts[first]! : 0;
      const segment = first < held ? base.keys[first >>> shift]! : '';
      const copyBase = (from: number, to: number) => {
        if (from >= to) return;
        pieces.push(segment.slice(base.starts[from]! - origin, base.starts[to]! - origin));
        const moved = at - base.starts[from]!;
        for (let user = from; user < to; user++) starts[user] = base.starts[user]! + moved;
        at += base.starts[to]! - base.starts[from]!;
      };
      let from = first;
      const firstChange = k;
      for (; k < overlay.users.length && overlay.users[k]! < end; k++) {
        const user = overlay.users[k]!;
        copyBase(from, Math.min(user, held));
        const key = overlay.keys.slice(overlay.starts[k], overlay.starts[k + 1]);
        pieces.push(key);
        starts[user] = at;
        at += key.length;
        from = user + 1;
      }
      copyBase(from, Math.min(end, held));
      keys.push(pieces.join(''));
      filters.push(filtersWithChanges(base, first, end, overlay, changedKeys, firstChange, k));
      yield;
    }
    starts[users] = at;
    const seqs = new Float64Array(users);
    seqs.set(base.seqs);
    seqs.set(overlay.addedSeqs, held);
    const orders = {} as Record<SortField, Int32Array>;
    for (const field of SORT_FIELDS) orders[field] = yield* mergedOrder(base.orders[field], overlay.inserts[field], overlay, users);
    const places = { lastname: yield* placesIn(orders.lastname), firstname: yield* placesIn(orders.firstname), email: yield* placesIn(orders.email) };
    const kinds = new Uint8Array(users);
    kinds.set(base.kinds);
    for (let change = 0; change < overlay.users.length; change++) kinds[overlay.users[change]!] = overlay.kinds[change]!;
    const bytes = at + starts.byteLength + kinds.byteLength + seqs.byteLength + 2 * 3 * 4 * users + filterBytes(users);
    // Last, so that terms searched for while the merge ran are carried too.
    const matches = yield* this.#carriedMatches(overlay, users);
    const byteCounts = yield* byteCountsIn(keys);
    const { blockShift } = base;
    return new SearchIndex({ keys, shift, starts, kinds, seqs, orders, places, byteCounts, filters, blockShift, bytes, matches }, this.version);
  }

  /**
   * This index as it is, laid over `merged` (`from.compacted()`, or its steps run to the end) rather
   * than over the base `from` shares with it: what this index holds beyond `from`'s changes (changes
   * read since, of newer users or of the same ones again) laid over the merged one. Undefined when
   * this index is not laid over `from`'s base with at least its changes (it was read whole or
   * merged otherwise meanwhile), or its changes cannot be laid over the merged one.
   */
  rebasedOnto(merged: SearchIndex, from: SearchIndex): SearchIndex | undefined {
    if (this.#base !== from.#base || merged.version !== from.version || merged.#overlay !== undefined || this.version < from.version) return undefined;
    // Every user `from` laid over is laid over this one too (changed again or not): it descends from `from`.
    const seqs = new Set(this.#overlay?.changes.map((change) => change.seq));
    if (from.#overlay?.changes.some((change) => !seqs.has(change.seq)) === true) return undefined;
    const merging = new Set(from.#overlay?.changes);
    const since = (this.#overlay?.changes ?? []).filter((change) => !merging.has(change));
    if (since.length === 0 && this.users === merged.users) return new SearchIndex(merged.#base, this.version);
    return merged.withChanges(this.version, this.users, since);
  }

  /**
   * The base's kept matches of each term, as they are once its changes are merged in: those of
   * users not changed, and the changed users whose key holds the term now (users keep their
   * numbers). Without them, every term searched for was scanned again after each merge (30–90 ms
   * each at a million users, on the request thread), under steady writes about once a second.
   */
  *#carriedMatches(overlay: Overlay, users: number): Generator<undefined, LruCache<string, Int32Array | 'many'>, undefined> {
    const carried = baseMatches();
    const keepUpTo = Math.max(KEPT_MATCHES_ANYWAY, Math.floor(users / KEPT_MATCHES_SHARE));
    // The terms used last only: each carried costs a look at every change, on the request thread.
    let older = this.#base.matches.size - CARRIED_TERMS;
    for (const [term, kept] of [...this.#base.matches.entries()]) {
      if (older-- > 0) continue;
      if (kept === 'many') {
        carried.set(term, 'many');
        continue;
      }
      const found: number[] = [];
      for (const user of kept) if (!passesOver(overlay, user)) found.push(user);
      this.#scanChanges(term, (user) => found.push(user));
      if (found.length > keepUpTo) carried.set(term, 'many');
      else carried.set(term, Int32Array.from(found).sort());
      yield;
    }
    return carried;
  }

  /**
   * Where each change goes in the base order of `field`: before which base place, in order;
   * undefined if a tie with a user not `replaced` leaves it open (ties are ordered by an id the
   * index does not hold), or a name holding the separator makes a base key unreadable. A change
   * placed before keeps its place (more users replaced since only removes ties): the changes laid
   * over before stay in the order they were (`previous`'s, less the users changed again:
   * `superseded`), and only the `fresh` ones (places in `changes`) are searched for and merged in.
   */
  #placeInBase(
    field: SortField,
    fresh: readonly number[],
    placements: readonly Placement[],
    numbers: Int32Array,
    passedOver: (user: number) => boolean,
    previous: Overlay | undefined,
    superseded: ReadonlySet<number>,
  ): { before: Int32Array; users: Int32Array } | undefined {
    const keyOrder = sortKeyOrder(field);
    const placementAt = (k: number) => placements[k]!;
    const compareKeys = (x: Placement['keys'], y: Placement['keys']) => {
      for (const key of keyOrder) if (x[key] !== y[key]) return x[key] < y[key] ? -1 : 1;
      return x.id < y.id ? -1 : x.id > y.id ? 1 : 0;
    };
    const byKey = (a: number, b: number) => compareKeys(placementAt(a).keys, placementAt(b).keys);
    const unplaced = fresh.filter((k) => placementAt(k).before[field] === undefined);
    const keyed = unplaced.map((k) => ({ k, key: keyOrder.map((key) => placementAt(k).keys[key]) })).sort((a, b) => byKey(a.k, b.k));
    const order = this.#base.orders[field];
    let low = 0;
    for (const { k, key } of keyed) {
      // The first base place whose keys come after the change's, searched from the last one found:
      // in steps that double until one is past it (changes are usually close together), then halving.
      let high = low;
      for (let step = 1; high < order.length; step *= 2) {
        const compared = this.#compareBaseKeys(order[high]!, keyOrder, key);
        if (compared === undefined) return undefined;
        if (compared >= 0) break;
        low = high + 1;
        high = low + step;
      }
      high = Math.min(high, order.length);
      while (low < high) {
        const middle = (low + high) >>> 1;
        const compared = this.#compareBaseKeys(order[middle]!, keyOrder, key);
        if (compared === undefined) return undefined;
        if (compared < 0) low = middle + 1;
        else high = middle;
      }
      // Equal keys from here on: only a replaced user's old place (passed over) may tie.
      for (let place = low; place < order.length && this.#compareBaseKeys(order[place]!, keyOrder, key) === 0; place++) {
        if (!passedOver(order[place]!)) return undefined;
      }
      placementAt(k).before[field] = low;
    }
    const beforeOf = (k: number) => placementAt(k).before[field]!;
    const incoming = [...fresh].sort((a, b) => beforeOf(a) - beforeOf(b) || byKey(a, b));
    // Merged with the earlier changes (in their order already), the users changed again left out:
    // the runs of earlier changes between two incoming ones are copied whole, so an update's cost
    // grows with its own changes, not with every change laid over before.
    const earlier = previous?.inserts[field];
    const earlierBefore = earlier?.before ?? new Int32Array(0);
    const earlierUsers = earlier?.users ?? new Int32Array(0);
    const earlierCount = earlierUsers.length;
    // The place among the earlier changes each incoming one goes before: the first that goes before
    // a later base place, or before the same one with keys that come after. The earlier changes are
    // in that order by the keys they were placed with (those of the users changed again included,
    // which are left out below wherever the incoming ones go among them).
    const pointOf = (k: number) => {
      const place = beforeOf(k);
      const keys = placementAt(k).keys;
      let low = 0;
      let high = earlierCount;
      while (low < high) {
        const middle = (low + high) >>> 1;
        const placed = previous!.placements[placeOf(previous!.users, earlierUsers[middle]!)]!;
        if ((earlierBefore[middle]! - place || compareKeys(placed.keys, keys)) < 0) low = middle + 1;
        else high = middle;
      }
      return low;
    };
    const points = incoming.map(pointOf);
    const dropped: number[] = [];
    for (const user of superseded) {
      const e = earlierUsers.indexOf(user);
      if (e >= 0) dropped.push(e);
    }
    dropped.sort((x, y) => x - y);
    const count = placements.length;
    const before = new Int32Array(count);
    const placedUsers = new Int32Array(count);
    let at = 0;
    let from = 0;
    let next = 0;
    let drop = 0;
    for (;;) {
      const insertAt = next < incoming.length ? points[next]! : Infinity;
      const dropAt = drop < dropped.length ? dropped[drop]! : Infinity;
      const to = Math.min(insertAt, dropAt, earlierCount);
      if (to > from) {
        if (at + to - from > count) return undefined;
        before.set(earlierBefore.subarray(from, to), at);
        placedUsers.set(earlierUsers.subarray(from, to), at);
        at += to - from;
        from = to;
      }
      if (insertAt === to) {
        if (at >= count) return undefined;
        const k = incoming[next++]!;
        before[at] = beforeOf(k);
        placedUsers[at++] = numbers[k]!;
      } else if (dropAt === to) {
        from = to + 1;
        drop += 1;
      } else break;
    }
    if (at !== count) return undefined;
    return { before, users: placedUsers };
  }

  /**
   * How a held user's keys (as the base holds them) compare with `key`, field by field in
   * `keyOrder`; undefined if its search key does not split into three. Called tens of times for
   * each change placed, so it makes no objects (it made 96 MB of them in 8 s under a SCIM sync).
   */
  #compareBaseKeys(user: number, keyOrder: readonly SortField[], key: readonly string[]): number | undefined {
    const base = this.#base;
    const origin = segmentOrigin(base, user);
    const keys = base.keys[user >>> base.shift]!;
    const start = base.starts[user]! - origin;
    const end = base.starts[user + 1]! - 1 - origin;
    const first = keys.indexOf(SEARCH_KEY_SEPARATOR, start);
    const second = first < 0 ? -1 : keys.indexOf(SEARCH_KEY_SEPARATOR, first + 1);
    const third = second < 0 ? -1 : keys.indexOf(SEARCH_KEY_SEPARATOR, second + 1);
    if (first < 0 || second < 0 || second >= end || (third >= 0 && third < end)) return undefined;
    for (let i = 0; i < keyOrder.length; i++) {
      const field = keyOrder[i]!;
      const compared =
        field === 'firstname'
          ? compareRange(keys, start, first, key[i]!)
          : field === 'lastname'
            ? compareRange(keys, first + 1, second, key[i]!)
            : compareRange(keys, second + 1, end, key[i]!);
      if (compared !== 0) return compared;
    }
    return 0;
  }

  /**
   * The exact number of users matching, and the seqs of the page's users in order. The filter
   * (kind, and membership of the room) is tested as each match is found, so what the page and the
   * total are made from is the filtered matches only; when only the room's members can match, the
   * scan leaps from one member's key to the next.
   */
  search(search: IndexSearch): { total: number; seqs: number[] } {
    const matches = this.#matches(search);
    const total = matches.count;
    if (total <= search.offset) return { total, seqs: [] };
    const list = matches.list;
    // Picking the page's users from the matches by their places takes about total × log(offset + size) steps,
    // WALK_STEP_COST of them to a step of the walk; walking the order to the page, about users × (offset + size) / total if they are spread out.
    const sort = list !== undefined && total <= SORT_UP_TO ? (total * Math.log2(search.offset + search.size + 1)) / WALK_STEP_COST : Infinity;
    const walk = this.users * Math.min(1, (search.offset + search.size) / total);
    if (sort < walk) return { total, seqs: this.#sortedPage(list!, search) };
    const marks = matches.marks;
    const walked = this.#page((user) => marks[user] === 1, search, sort);
    return { total, seqs: walked ?? this.#sortedPage(list!, search) };
  }

  /**
   * The seqs of the page's users when the lookup has no terms: the order is walked from its start
   * and stops after the page, so a first page costs a few dozen steps whatever the organization's
   * size (its total comes from the tallies, see signatory-rules.ts).
   */
  pageWithoutTerms(search: Omit<IndexSearch, 'terms'>): number[] {
    return this.#page(this.#candidateKinds(search), search, Infinity)!;
  }

  /**
   * The page's seqs among few matching users, by their places in the order: a base user's place,
   * or for a changed user the base place it goes before (ahead of the base user there), then its
   * rank among those changes. Each user is one number (place × (changes + 1) + rank, a base user
   * ranking last), and only the first `offset + size` of them in the page's direction are picked
   * and sorted (firstInOrder): a term bunched in the order sorted by (`mul` in last names) was
   * walked to for up to 687,000 steps before its matches were sorted whole (10-19 ms of a CPU
   * profile at a million users).
   */
  #sortedPage(users: Int32Array, search: Omit<IndexSearch, 'terms'>): number[] {
    const places = this.#base.places[search.sortBy];
    const order = this.#base.orders[search.sortBy];
    const inserts = this.#overlay?.inserts[search.sortBy];
    const changes = inserts?.users.length ?? 0;
    const rankOf = new Map<number, number>();
    for (let rank = 0; rank < changes; rank++) rankOf.set(inserts!.users[rank]!, rank);
    const spread = changes + 1;
    const sorted = new Float64Array(users.length);
    for (let k = 0; k < users.length; k++) {
      const user = users[k]!;
      const rank = changes === 0 ? undefined : rankOf.get(user);
      sorted[k] = rank === undefined ? places[user]! * spread + changes : inserts!.before[rank]! * spread + rank;
    }
    const first = firstInOrder(sorted, search.offset + search.size, search.direction);
    const seqs: number[] = [];
    for (let k = search.offset; k < first.length; k++) {
      const value = first[k]!;
      const place = Math.floor(value / spread);
      const rank = value - place * spread;
      seqs.push(this.#seqOf(rank === changes ? order[place]! : inserts!.users[rank]!));
    }
    return seqs;
  }

  /** Whether a user's kind (and membership, if the filter asks) makes it a candidate of the search. */
  #candidateKinds(search: Omit<IndexSearch, 'terms'>): (user: number) => boolean {
    const accepted = acceptedKinds(search.includeExternal, search.filter);
    const members = this.#membersFor(search);
    const kindAt = this.#kinds();
    if (members === undefined) return (user) => accepted[kindAt(user)] === 1;
    return (user) => accepted[kindAt(user) | (members.has(user) ? ROOM_MEMBER : 0)] === 1;
  }

  /** Each user's kind: a base user's from the base, a changed (or new) user's from its change. */
  #kinds(): (user: number) => number {
    const kinds = this.#base.kinds;
    const overlay = this.#overlay;
    if (overlay === undefined) return (user) => kinds[user]!;
    const held = kinds.length;
    return (user) => (user < held && !passesOver(overlay, user) ? kinds[user]! : overlay.kinds[changeOf(overlay, user)]!);
  }

  /** The room's members when the filter depends on them (which the search must then give). */
  #membersFor(search: Omit<IndexSearch, 'terms'>): RoomMembers | undefined {
    if (!filterNeedsMembers(search.filter)) return undefined;
    if (search.members === undefined) throw new Error('this filter needs the room members');
    return search.members;
  }

  /**
   * The page's seqs: the order is walked, in either direction, past `offset` candidates. With
   * changes laid over the base, the base order passes over the changed users' old places, and
   * each changed user is met before the base place it goes before. Undefined when the page is not
   * complete after `maxSteps` users looked at.
   */
  #page(isCandidate: (user: number) => boolean, search: Omit<IndexSearch, 'terms'>, maxSteps: number): number[] | undefined {
    const order = this.#base.orders[search.sortBy];
    const overlay = this.#overlay;
    const inserts = overlay?.inserts[search.sortBy] ?? { before: new Int32Array(0), users: new Int32Array(0) };
    const seqs: number[] = [];
    let skip = search.offset;
    let steps = 0;
    const visit = (user: number) => {
      steps += 1;
      if (!isCandidate(user)) return;
      if (skip > 0) skip -= 1;
      else seqs.push(this.#seqOf(user));
    };
    const more = () => seqs.length < search.size && steps <= maxSteps;
    if (search.direction === 'ASC') {
      let next = 0;
      for (let place = 0; place <= order.length && more(); place++) {
        for (; next < inserts.before.length && inserts.before[next] === place && more(); next++) visit(inserts.users[next]!);
        if (place < order.length && more() && (overlay === undefined || !passesOver(overlay, order[place]!))) visit(order[place]!);
      }
    } else {
      let next = inserts.before.length - 1;
      for (let place = order.length; place >= 0 && more(); place--) {
        for (; next >= 0 && inserts.before[next] === place && more(); next--) visit(inserts.users[next]!);
        if (place > 0 && more() && (overlay === undefined || !passesOver(overlay, order[place - 1]!))) visit(order[place - 1]!);
      }
    }
    return seqs.length < search.size && steps > maxSteps ? undefined : seqs;
  }

  /**
   * The users whose key contains every term and whose kind (and membership) the filter accepts. The
   * filter is tested as each key is found, before any further term is: the longest term is scanned
   * for (from one member's key to the next when only the room's members can match, or in each
   * member's key when they are few), the others checked on what is left, or scanned for too when
   * much is left.
   */
  #matches(search: IndexSearch): Matches {
    const users = this.users;
    const [first, ...rest] = [...search.terms].map(asBytes).sort((a, b) => b.length - a.length);
    // Listed while they may be sorted for the page, or checked one by one for a further term.
    const matches = new Matches(users, rest.length === 0 ? SORT_UP_TO : Math.max(SORT_UP_TO, Math.ceil(users / DENSE)));
    if (search.terms.some((term) => term.includes('\0'))) return matches;
    const accepted = acceptedKinds(search.includeExternal, search.filter);
    const members = this.#membersFor(search);
    const kindAt = this.#kinds();
    const take =
      members === undefined
        ? (user: number) => {
            if (accepted[kindAt(user)] === 1) matches.add(user);
          }
        : (user: number) => {
            if (accepted[kindAt(user) | (members.has(user) ? ROOM_MEMBER : 0)] === 1) matches.add(user);
          };
    if (members !== undefined && onlyMembersAccepted(accepted)) {
      if (first !== undefined && members.size * FEW_MEMBERS > users) this.#scanMembers(first, members, take);
      else {
        for (let user = members.next(0); user >= 0 && user < users; user = members.next(user + 1)) {
          if (first === undefined || this.#contains(user, first)) take(user);
        }
      }
    } else if (first === undefined) {
      for (let user = 0; user < users; user++) take(user);
    } else {
      this.#scan(first, take);
    }
    for (const term of rest) {
      const kept = this.#base.matches.get(term);
      const fromKept = kept !== undefined && kept !== 'many' && kept.length <= KEPT_READ_COST * matches.count;
      if (matches.count * DENSE > users || fromKept || (kept === undefined && matches.count > KEPT_MATCHES_ANYWAY)) {
        // Many left, or the base keeps the term's matches and they are not many more than those left
        // (or may keep them: they are then kept for the next search): one more pass over the keys,
        // or over those kept, costs less than a look at each key left (37,750 for `ann sch` at a
        // million users: 13-19 ms, at every version under steady writes).
        const also = new Uint8Array(users);
        this.#scan(term, (user) => (also[user] = 1));
        matches.keepOnly((user) => also[user] === 1);
      } else {
        matches.keepOnly((user) => this.#contains(user, term));
      }
    }
    return matches;
  }

  /** Whether the user's key contains the term: compared here, as keys are short (an indexOf could run on past the key). */
  #contains(user: number, term: string): boolean {
    const overlay = this.#overlay;
    if (overlay !== undefined && (user >= this.#base.seqs.length || passesOver(overlay, user))) {
      const change = changeOf(overlay, user);
      return containsIn(overlay.keys, overlay.starts[change]!, overlay.starts[change + 1]! - 1, term);
    }
    const base = this.#base;
    const origin = segmentOrigin(base, user);
    return containsIn(base.keys[user >>> base.shift]!, base.starts[user]! - origin, base.starts[user + 1]! - 1 - origin, term);
  }

  /**
   * Calls `found` with every member of the room whose key contains the term. The scan leaps from
   * a member's key to the next occurrence of the term, and from the key holding it to the next
   * member's: it never reads more than a scan of every key, and far less when the term is common
   * (only the members' keys, then). Changed users' keys are checked one by one.
   */
  #scanMembers(term: string, members: RoomMembers, found: (user: number) => void): void {
    const { starts } = this.#base;
    const needle = needleOf(term, this.#base.byteCounts);
    const held = this.#base.seqs.length;
    const overlay = this.#overlay;
    const kept = this.#base.matches.get(term);
    if (kept !== undefined && kept !== 'many') {
      for (const user of kept) if (members.has(user) && (overlay === undefined || !passesOver(overlay, user))) found(user);
      this.#scanChanges(term, (user) => members.has(user) && found(user));
      return;
    }
    // The next member held in the base, from `from` on, passing over those changed since (their keys are the overlay's).
    const next = (from: number) => {
      let user = members.next(from);
      while (overlay !== undefined && user >= 0 && user < held && passesOver(overlay, user)) user = members.next(user + 1);
      return user < held ? user : -1;
    };
    const bits = tripleBits(term);
    for (let segment = 0; segment < this.#base.keys.length; segment++) {
      if (next(segment << this.#base.shift) < 0) break;
      forEachRun(this.#base, segment, bits, (text, from, to) => {
        // Searched for from a member's key on: when not in the run, on to the next run.
        const origin = starts[from]!;
        for (let user = next(from); user >= 0 && user < to;) {
          const at = findNext(text, needle, starts[user]! - origin);
          if (at < 0) return;
          const holder = keyAt(starts, origin + at, user);
          if (holder === user) {
            found(user);
            user = next(user + 1);
          } else {
            user = next(holder);
          }
        }
      });
    }
    this.#scanChanges(term, (user) => members.has(user) && found(user));
  }

  /** Calls `found` with every changed user (laid over the base) whose key contains the term. */
  #scanChanges(term: string, found: (user: number) => void): void {
    const overlay = this.#overlay;
    if (overlay === undefined) return;
    for (let change = 0; change < overlay.users.length; change++) {
      if (containsIn(overlay.keys, overlay.starts[change]!, overlay.starts[change + 1]! - 1, term)) found(overlay.users[change]!);
    }
  }

  /**
   * Calls `found` with every user whose key contains the term: the base's keys (but for users
   * changed since), then the changed users' keys. The base's matches are kept for the next search
   * when they are few (see KEPT_MATCHES_SHARE), and read from there rather than from the keys.
   */
  #scan(term: string, found: (user: number) => void): void {
    const overlay = this.#overlay;
    const { matches } = this.#base;
    const kept = matches.get(term);
    if (kept !== undefined && kept !== 'many') {
      for (const user of kept) if (overlay === undefined || !passesOver(overlay, user)) found(user);
    } else {
      const needle = needleOf(term, this.#base.byteCounts);
      const keepUpTo = kept === 'many' ? 0 : Math.max(KEPT_MATCHES_ANYWAY, Math.floor(this.#base.seqs.length / KEPT_MATCHES_SHARE));
      let listed: Int32Array = new Int32Array(Math.min(keepUpTo, 1024));
      let count = 0;
      scanKeys(this.#base, needle, tripleBits(term), (user) => {
        if (count < keepUpTo) {
          if (count === listed.length) listed = grown(listed, keepUpTo);
          listed[count] = user;
        }
        count += 1;
        if (overlay === undefined || !passesOver(overlay, user)) found(user);
      });
      if (kept === undefined) matches.set(term, count <= keepUpTo ? listed.slice(0, count) : 'many');
    }
    this.#scanChanges(term, found);
  }
}

/** Where a base keeps the matches of the terms searched for (see KEPT_MATCHES_SHARE). */
function baseMatches(): LruCache<string, Int32Array | 'many'> {
  return new LruCache(BASE_MATCHES_BYTES, (found) => (found === 'many' ? 0 : found.byteLength) + 64);
}

/** A copy of the list with twice its room, at most `limit`. */
function grown(list: Int32Array, limit: number): Int32Array {
  const bigger = new Int32Array(Math.min(limit, Math.max(1024, 2 * list.length)));
  bigger.set(list);
  return bigger;
}

/**
 * The first `count` values in `direction` (ascending or descending), in that order: sorted whole
 * when `count` is near their number, else picked with a heap of `count` (a page of 20 among
 * 44,510 matches: 114 µs, where sorting them all took 3.4 ms).
 */
export function firstInOrder(values: Float64Array, count: number, direction: SortDirection): Float64Array {
  const take = Math.min(count, values.length);
  // Descending, as ascending of the negated values.
  const sign = direction === 'ASC' ? 1 : -1;
  if (take * 8 >= values.length) {
    const sorted = Float64Array.from(values, (value) => sign * value).sort();
    return sorted.subarray(0, take).map((value) => sign * value);
  }
  // A max-heap of the `take` smallest seen so far.
  const heap = new Float64Array(take);
  let size = 0;
  for (let k = 0; k < values.length; k++) {
    const value = sign * values[k]!;
    if (size < take) {
      let at = size++;
      while (at > 0) {
        const up = (at - 1) >> 1;
        if (heap[up]! >= value) break;
        heap[at] = heap[up]!;
        at = up;
      }
      heap[at] = value;
    } else if (take > 0 && value < heap[0]!) {
      let at = 0;
      for (;;) {
        const left = 2 * at + 1;
        if (left >= take) break;
        const larger = left + 1 < take && heap[left + 1]! > heap[left]! ? left + 1 : left;
        if (heap[larger]! <= value) break;
        heap[at] = heap[larger]!;
        at = larger;
      }
      heap[at] = value;
    }
  }
  return heap.sort().map((value) => sign * value);
}

/** Whether only users accepted as room members can match (the filter asks for members). */
function onlyMembersAccepted(accepted: Uint8Array): boolean {
  for (let kind = 0; kind < accepted.length; kind++) if ((kind & ROOM_MEMBER) === 0 && accepted[kind] === 1) return false;
  return true;
}

/**
 * The users a search matches: a byte each, and a list of them while there are at most `limit`
 * (they are then sorted for the page, or checked one by one for a further term).
 */
class Matches {
  /** 1 for each user matching. */
  readonly marks: Uint8Array;
  count = 0;
  #list: Int32Array | undefined;
  readonly #limit: number;

  constructor(users: number, limit: number) {
    this.marks = new Uint8Array(users);
    this.#limit = limit;
    this.#list = new Int32Array(Math.min(limit, 1024));
  }

  /** The users matching (in no particular order), or undefined when there are more than the limit. */
  get list(): Int32Array | undefined {
    return this.#list?.subarray(0, this.count);
  }

  add(user: number): void {
    this.marks[user] = 1;
    const list = this.#list;
    if (list !== undefined) {
      if (this.count === this.#limit) this.#list = undefined;
      else if (this.count < list.length) list[this.count] = user;
      else this.#grow(user);
    }
    this.count += 1;
  }

  #grow(user: number): void {
    const list = new Int32Array(Math.min(this.#limit, 2 * this.#list!.length));
    list.set(this.#list!);
    list[this.count] = user;
    this.#list = list;
  }

  /** Keeps the users matching that pass `test`: over the list, or over every user's byte once there are many (listed again if few are kept). */
  keepOnly(test: (user: number) => boolean): void {
    const marks = this.marks;
    const list = this.#list;
    if (list !== undefined) {
      let kept = 0;
      for (let k = 0; k < this.count; k++) {
        const user = list[k]!;
        if (test(user)) list[kept++] = user;
        else marks[user] = 0;
      }
      this.count = kept;
      return;
    }
    this.count = 0;
    this.#list = new Int32Array(Math.min(this.#limit, 1024));
    for (let user = 0; user < marks.length; user++) {
      if (marks[user] !== 1) continue;
      if (test(user)) this.add(user);
      else marks[user] = 0;
    }
  }
}

/**
 * Runs the index's search paths once, each over every user, with terms only the separator between
 * a key's fields matches (no search term holds it: terms are split on white space): the first
 * lookup with terms after a start then finds the code compiled rather than paying for it.
 */
export function warmUp(index: SearchIndex): void {
  const search = { includeExternal: true, filter: {}, sortBy: 'lastname', offset: 0, size: 20 } as const;
  // Every user, then a further term over many (a second pass), then over none (user by user).
  index.search({ ...search, terms: [SEARCH_KEY_SEPARATOR], direction: 'ASC' });
  index.search({ ...search, terms: [SEARCH_KEY_SEPARATOR, SEARCH_KEY_SEPARATOR], direction: 'DESC' });
  index.search({ ...search, terms: [`${SEARCH_KEY_SEPARATOR}\u0001`, SEARCH_KEY_SEPARATOR], direction: 'ASC' });
  // The filters on a room's members (one user in eight, made up): a scan testing membership, then one leaping from member to member.
  const members = new RoomMembers(new Uint8Array(Math.ceil(index.users / 8)).fill(1));
  index.search({ ...search, terms: [SEARCH_KEY_SEPARATOR], filter: { roomMember: false }, members, direction: 'ASC' });
  index.search({ ...search, terms: [SEARCH_KEY_SEPARATOR], filter: { roomMember: true }, members, direction: 'DESC' });
}

/**
 * Calls `found` with the number of every key of the base (ended by U+0000, starting at `starts`)
 * that contains the term: one pass, skipping to the next key after a match, over the runs of
 * blocks whose filters hold every one of the term's byte triples (`bits`; none: every block).
 */
function scanKeys(base: Base, needle: Needle, bits: readonly number[], found: (key: number) => void): void {
  for (let segment = 0; segment < base.keys.length; segment++) {
    forEachRun(base, segment, bits, (text, from) => scanText(text, base.starts[from]!, from, base.starts, needle, found));
  }
}

/**
 * Calls `scan` with each run of the segment's users, `from` to `to`, whose blocks' filters hold
 * every one of a term's byte triples (`bits`; none, or no filters: the whole segment), and their keys' text (a
 * slice of the segment's string, which V8 searches in place, without a copy), which starts at
 * `starts[from]` in the keys as if joined.
 */
function forEachRun(base: Base, segment: number, bits: readonly number[], scan: (text: string, from: number, to: number) => void): void {
  const { keys, shift, starts, blockShift } = base;
  const text = keys[segment]!;
  const first = segment << shift;
  const end = Math.min(base.seqs.length, first + (1 << shift));
  const filters = base.filters[segment];
  // Not made yet (they are, in steps, after a load or a merge): the whole segment, as a lookup must not wait for them.
  if (bits.length === 0 || filters === undefined) {
    scan(text, first, end);
    return;
  }
  const origin = starts[first]!;
  const block = 1 << blockShift;
  for (let from = first; from < end; from += block) {
    if (!mayHold(filters, (from - first) >>> blockShift, bits)) continue;
    // A run of blocks that may hold the term, up to one that does not (passed over next) or the end.
    let to = from + block;
    while (to < end && mayHold(filters, (to - first) >>> blockShift, bits)) to += block;
    to = Math.min(to, end);
    scan(text.slice(starts[from]! - origin, starts[to]! - origin), from, to);
    from = to;
  }
}

/** scanKeys over one string of whole keys: `origin`, where it starts in the joined keys; `first`, its first key. */
function scanText(text: string, origin: number, first: number, starts: Int32Array, needle: Needle, found: (key: number) => void): void {
  let key = first;
  let at = findNext(text, needle, 0);
  while (at >= 0) {
    key = keyAt(starts, origin + at, key);
    found(key);
    at = findNext(text, needle, starts[key + 1]! - origin);
  }
}

/**
 * Sets the filter bit (from word `words` on) of every three consecutive bytes from `from` to `to`:
 * those of each key, and a few across the end of one (with its U+0000, which no term holds). About
 * 6 ns a byte here (a million users' keys: 280 ms), a third less than skipping those few.
 */
function addTriples(filters: Int32Array, words: number, bytes: Uint8Array, from: number, to: number): void {
  let triple = 0;
  for (let at = from; at < to; at++) {
    triple = ((triple << 8) | bytes[at]!) & 0xffffff;
    const bit = tripleBit(triple);
    filters[words + (bit >>> 5)]! |= 1 << (bit & 31);
  }
}

/**
 * Users per block of a segment's filters, as a power of two: a scan for a rare term reads only the
 * blocks whose filter says it may be there (a term new to the index took 35 ms to scan for at a
 * million users, the whole of a lookup right after a write: docs/benchmarks.md).
 */
const FILTER_BLOCK_SHIFT = 10;
/**
 * Users' worth of filters made between two pauses (a power of two): about 200 KB of keys, 1-3 ms
 * here. At MERGE_STEP's 16,384, the steps after a load took 5-10 ms each, and SCIM's lookups by
 * key, run just then, had a p99 of 13-14 ms instead of 4 ms.
 */
const FILTER_STEP = 4096;
/** Bits of a block's filter, as a power of two: 2^15 bits, 4 KB per 1,024 users (4 bytes a user). */
const FILTER_BITS_SHIFT = 15;
const FILTER_WORDS = 1 << (FILTER_BITS_SHIFT - 5);

/** The memory the filters of `users` users take (in blocks of FILTER_BLOCK_SHIFT). */
function filterBytes(users: number): number {
  return Math.ceil(users / (1 << FILTER_BLOCK_SHIFT)) * FILTER_WORDS * 4;
}

/** The filter bit of three consecutive bytes (a Fibonacci hash of the 24 bits they make). */
function tripleBit(triple: number): number {
  return Math.imul(triple, 0x9e3779b1) >>> (32 - FILTER_BITS_SHIFT);
}

/** The filter bits of the term's byte triples; none for a term shorter than three bytes (every block may hold it). */
function tripleBits(term: string): number[] {
  const bits: number[] = [];
  for (let at = 2; at < term.length; at++) bits.push(tripleBit((term.charCodeAt(at - 2) << 16) | (term.charCodeAt(at - 1) << 8) | term.charCodeAt(at)));
  return bits;
}

/** Whether the block's filter has every bit: false only when the block holds no key with every triple, so not the term. */
function mayHold(filters: Int32Array, block: number, bits: readonly number[]): boolean {
  const words = block * FILTER_WORDS;
  for (const bit of bits) if ((filters[words + (bit >>> 5)]! & (1 << (bit & 31))) === 0) return false;
  return true;
}

/**
 * The block filters of the segment of users `first` to `end` once the overlay's changes `from` to
 * `to` (those of its users) are merged in: the base's, with the bits of the changed users' keys
 * added (a user keeps its number, so its block; those of a key it had stay, which only makes a
 * scan read a block it need not). Undefined when the base had none made for it (`filtering()` of
 * the merged base makes them), but for a segment of new users only.
 */
function filtersWithChanges(
  base: Base,
  first: number,
  end: number,
  overlay: Overlay,
  changedKeys: Uint8Array,
  from: number,
  to: number,
): Int32Array | undefined {
  const held = base.seqs.length;
  const had = first < held ? base.filters[first >>> base.shift] : undefined;
  if (had === undefined && first < held) return undefined;
  const blockShift = base.blockShift;
  const filters = new Int32Array(Math.ceil((end - first) / (1 << blockShift)) * FILTER_WORDS);
  if (had !== undefined) filters.set(had);
  for (let change = from; change < to; change++) {
    const words = ((overlay.users[change]! - first) >>> blockShift) * FILTER_WORDS;
    addTriples(filters, words, changedKeys, overlay.starts[change]!, overlay.starts[change + 1]!);
  }
  return filters;
}

/**
 * The block filters of a segment of keys (users `first` to `end`, `starts` as the base counts
 * them): for each block of 2^`blockShift` users, a bit set for every three consecutive bytes within
 * one of its keys. Pauses every FILTER_STEP users.
 */
function* blockFilters(text: string, starts: Int32Array, first: number, end: number, blockShift: number): Generator<undefined, Int32Array, undefined> {
  const size = 1 << blockShift;
  const blocks = Math.ceil((end - first) / size);
  const filters = new Int32Array(blocks * FILTER_WORDS);
  const origin = starts[first]!;
  // Bytes, not the string: a typed array read by index cost a third less than charCodeAt here.
  const bytes = Buffer.from(text, 'latin1');
  for (let block = 0; block < blocks; block++) {
    const from = starts[first + block * size]! - origin;
    const to = starts[Math.min(end, first + (block + 1) * size)]! - origin;
    addTriples(filters, block * FILTER_WORDS, bytes, from, to);
    if ((((block + 1) << blockShift) & (FILTER_STEP - 1)) === 0) yield;
  }
  return filters;
}

/** Where the string of a base user's segment starts, in the keys as if they were joined (as `starts` counts). */
function segmentOrigin(base: Base, user: number): number {
  return base.starts[(user >>> base.shift) << base.shift]!;
}

/** A base user's key: in which string it is, from where to where (its end, U+0000, left out). */
function baseKeyOf(base: Base, user: number): { text: string; from: number; end: number } {
  const origin = segmentOrigin(base, user);
  return { text: base.keys[user >>> base.shift]!, from: base.starts[user]! - origin, end: base.starts[user + 1]! - 1 - origin };
}

/**
 * A term as the keys are searched for it: from its rarest byte on (`tail`), the bytes before that
 * (`head`) compared where the tail is found. String#indexOf looks for the first byte of what it
 * is given and compares the rest there, so a term starting with a common letter ("example",
 * "ann") costs a stop at every such letter in the keys, its rarest byte far fewer.
 */
interface Needle {
  head: string;
  tail: string;
}

/**
 * The term's needle, by how often each byte occurs in the keys searched: from its first byte unless
 * another is several times rarer (each find of the tail whose head does not match costs another
 * call, where a search from the first byte goes on inside one).
 */
function needleOf(term: string, byteCounts: Uint32Array): Needle {
  let rarest = 0;
  for (let at = 1; at < term.length; at++) if (byteCounts[term.charCodeAt(at)]! < byteCounts[term.charCodeAt(rarest)]!) rarest = at;
  if (byteCounts[term.charCodeAt(rarest)]! * RARER < byteCounts[term.charCodeAt(0)]!) return { head: term.slice(0, rarest), tail: term.slice(rarest) };
  return { head: '', tail: term };
}

/** How many times rarer than a term's first byte another must be for the term to be searched for from it. */
const RARER = 4;

/** Where the next occurrence of the needle's term in `keys` starts, from `from` on; -1 when there is none. */
function findNext(keys: string, needle: Needle, from: number): number {
  const skip = needle.head.length;
  for (let at = keys.indexOf(needle.tail, from + skip); at >= 0; at = keys.indexOf(needle.tail, at + 1)) {
    if (skip === 0 || keys.startsWith(needle.head, at - skip)) return at - skip;
  }
  return -1;
}

/** How often each byte value occurs in the keys (one-byte strings), counted at one byte in 61: enough to tell rare bytes from common ones. */
function byteCountsOf(keys: readonly string[]): Uint32Array {
  return finished(byteCountsIn(keys));
}

/** byteCountsOf, pausing every MERGE_STEP samples (each a read of another cache line: about 5 ms in all at a million users). */
function* byteCountsIn(keys: readonly string[]): Generator<undefined, Uint32Array, undefined> {
  const counts = new Uint32Array(256);
  let step = 0;
  for (const text of keys) {
    for (let at = 0; at < text.length; at += 61) {
      counts[text.charCodeAt(at)]! += 1;
      if (++step % MERGE_STEP === 0) yield;
    }
  }
  return counts;
}

/** The key that holds byte `at`, searching from `from` (matches come in order): a few steps, then halving. */
function keyAt(starts: Int32Array, at: number, from: number): number {
  let key = from;
  for (let step = 0; step < 8; step++) {
    if (starts[key + 1]! > at) return key;
    key += 1;
  }
  let low = key;
  let high = starts.length - 2;
  while (low < high) {
    const middle = (low + high + 1) >>> 1;
    if (starts[middle]! <= at) low = middle;
    else high = middle - 1;
  }
  return low;
}

/** Whether keys[from, end) contains the term. */
function containsIn(keys: string, from: number, end: number, term: string): boolean {
  const last = end - term.length;
  const first = term.charCodeAt(0);
  for (let at = from; at <= last; at++) {
    if (keys.charCodeAt(at) !== first) continue;
    let length = 1;
    while (length < term.length && keys.charCodeAt(at + length) === term.charCodeAt(length)) length++;
    if (length === term.length) return true;
  }
  return false;
}

/** A string's UTF-8 bytes, one character per byte, as the index holds its keys. */
function asBytes(text: string): string {
  return /^[\x00-\x7f]*$/.test(text) ? text : Buffer.from(text, 'utf8').toString('latin1');
}

/** Compares keys[from, to) with `key`, byte-wise (both one byte per character). */
function compareRange(keys: string, from: number, to: number, key: string): number {
  const length = Math.min(to - from, key.length);
  for (let i = 0; i < length; i++) {
    const difference = keys.charCodeAt(from + i) - key.charCodeAt(i);
    if (difference !== 0) return difference;
  }
  return to - from - key.length;
}

/** Where `value` is in the ascending `values` (seqs, or changed users' numbers), or -1. */
function placeOf(values: Float64Array | Int32Array, value: number): number {
  let low = 0;
  let high = values.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const at = values[middle]!;
    if (at === value) return middle;
    if (at < value) low = middle + 1;
    else high = middle - 1;
  }
  return -1;
}

/** A user as a lookup tests it: the search key (UTF-8 bytes, one character each) and the kind bits. */
export interface UserState {
  key: string;
  kind: number;
}

/** The state of a changed user as the database holds it now. */
export function stateOfChange(user: IndexedUser): UserState {
  return { key: asBytes(user.searchKey), kind: kindOf(user) };
}

/**
 * Whether a user in this state can be in the answer of a lookup (terms, filter): every term in
 * its key, and its kind accepted as a member of the room or as a non-member (its membership is
 * not looked at, so this errs towards yes). A change whose old and new states both answer no
 * leaves every page and count of that lookup as it was.
 */
export function mayMatch(state: UserState, terms: readonly string[], includeExternal: boolean, filter: SignatoryFilter): boolean {
  const accepted = acceptedKinds(includeExternal, filter);
  if (accepted[state.kind] !== 1 && accepted[state.kind | ROOM_MEMBER] !== 1) return false;
  return terms.every((term) => containsIn(state.key, 0, state.key.length, asBytes(term)));
}

/** A lookup without terms, as far as where a user falls against one of its pages is concerned. */
export interface OrderedQuery {
  includeExternal: boolean;
  filter: SignatoryFilter;
  sortBy: SortField;
  direction: SortDirection;
}

/**
 * Where a user in this state falls against a full page of a lookup without terms whose first and
 * last users have the search keys `first` and `last`: `outside` when it cannot be on the page nor
 * ahead of it (not a candidate whatever its membership, or after the page's last user in its
 * order), `ahead` when it is a candidate before the page's first user, and `open` when it falls
 * within the page, ties with its first or last user (the ids that order ties are not in the
 * index), or is ahead of it with a candidacy that hangs on its membership, which the state does
 * not hold. A change whose old and new states fall alike, and not `open`, leaves that page as it
 * was: as many candidates as before come ahead of it, and none enters it.
 */
export function placeAgainstPage(state: UserState | undefined, page: { first: string; last: string }, query: OrderedQuery): 'outside' | 'ahead' | 'open' {
  if (state === undefined || !mayMatch(state, [], query.includeExternal, query.filter)) return 'outside';
  const sign = query.direction === 'DESC' ? -1 : 1;
  const toLast = compareSearchKeys(state.key, page.last, query.sortBy);
  if (toLast === undefined) return 'open';
  if (sign * toLast > 0) return 'outside';
  const toFirst = compareSearchKeys(state.key, page.first, query.sortBy);
  if (toFirst === undefined || sign * toFirst >= 0 || filterNeedsMembers(query.filter)) return 'open';
  return 'ahead';
}

/**
 * How two search keys (as UserState holds them: first name, last name and email, split by
 * SEARCH_KEY_SEPARATOR) compare in the order of `sortBy`, ascending, its key first and then the
 * others as sortKeyOrder lists them; 0 when all three are equal; undefined when one does not
 * split into three.
 */
export function compareSearchKeys(a: string, b: string, sortBy: SortField): number | undefined {
  const x = keyFieldsOf(a);
  const y = keyFieldsOf(b);
  if (x === undefined || y === undefined) return undefined;
  for (const field of sortKeyOrder(sortBy)) if (x[field] !== y[field]) return x[field] < y[field] ? -1 : 1;
  return 0;
}

function keyFieldsOf(key: string): Record<SortField, string> | undefined {
  const first = key.indexOf(SEARCH_KEY_SEPARATOR);
  const second = first < 0 ? -1 : key.indexOf(SEARCH_KEY_SEPARATOR, first + 1);
  if (second < 0 || key.indexOf(SEARCH_KEY_SEPARATOR, second + 1) >= 0) return undefined;
  return { firstname: key.slice(0, first), lastname: key.slice(first + 1, second), email: key.slice(second + 1) };
}

/** For each of the 16 kinds (external, needs invite, room member, not a candidate), 1 if such a user is a candidate under the filter. */
function acceptedKinds(includeExternal: boolean, filter: SignatoryFilter): Uint8Array {
  const accepted = new Uint8Array(16);
  for (let kind = 0; kind < 8; kind++) {
    const candidate = { external: (kind & EXTERNAL) !== 0, needsInvitation: (kind & NEEDS_INVITE) !== 0, roomMember: (kind & ROOM_MEMBER) !== 0 };
    accepted[kind] = matchesFilter(candidate, includeExternal, filter) ? 1 : 0;
  }
  return accepted;
}

/**
 * Builds the parts of a SearchIndex from what the database reads, in pieces:
 * the users in ascending seq order, then each sort order as seqs. parts() is
 * undefined when the pieces do not fit together.
 */
export class SearchIndexBuilder {
  readonly #version: number;
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #starts: Int32Array;
  readonly #kinds: Uint8Array;
  readonly #seqs: Float64Array;
  #users = 0;
  /** The keys joined, once the users are all read. */
  #keys: Uint8Array | undefined;
  readonly #orders: Record<SortField, Int32Array>;
  readonly #filled: Record<SortField, number> = { lastname: 0, firstname: 0, email: 0 };
  #consistent = true;

  /** For `users` users (the organization's count, read in the same snapshot). */
  constructor(version: number, users: number) {
    this.#version = version;
    this.#starts = new Int32Array(users + 1);
    this.#kinds = new Uint8Array(users);
    this.#seqs = new Float64Array(users);
    this.#orders = { lastname: new Int32Array(users), firstname: new Int32Array(users), email: new Int32Array(users) };
  }

  /** The next users, in ascending seq order. */
  addUsers(users: readonly IndexedUser[]): void {
    if (this.#keys !== undefined) throw new Error('users come before the sort orders');
    if (users.length === 0) return;
    if (this.#users + users.length > this.#seqs.length) {
      this.#consistent = false;
      return;
    }
    const chunk = Buffer.from(users.map((user) => user.searchKey).join('\0') + '\0', 'utf8');
    let at = 0;
    for (const user of users) {
      if (this.#users > 0 && user.seq <= this.#seqs[this.#users - 1]!) this.#consistent = false;
      at = chunk.indexOf(END_OF_KEY, at) + 1;
      this.#kinds[this.#users] = kindOf(user);
      this.#seqs[this.#users] = user.seq;
      this.#users += 1;
      this.#starts[this.#users] = this.#bytes + at;
    }
    this.#chunks.push(chunk);
    this.#bytes += chunk.byteLength;
  }

  /** The next seqs of a sort order (ascending), after all users were added. */
  addOrder(field: SortField, seqs: readonly number[]): void {
    this.#joinKeys();
    const read = this.#seqs.subarray(0, this.#users);
    const order = this.#orders[field];
    for (const seq of seqs) {
      const user = placeOf(read, seq);
      if (user < 0 || this.#filled[field] >= order.length) {
        this.#consistent = false;
        return;
      }
      order[this.#filled[field]++] = user;
    }
  }

  /** The parts of the index, or undefined when what was read does not fit together. */
  parts(): SearchIndexParts | undefined {
    this.#joinKeys();
    const complete = this.#users === this.#seqs.length && SORT_FIELDS.every((field) => this.#filled[field] === this.#users);
    if (!this.#consistent || !complete) return undefined;
    return { version: this.#version, keys: this.#keys!, starts: this.#starts, kinds: this.#kinds, seqs: this.#seqs, orders: this.#orders };
  }

  /** Joins the key chunks, once all users are read. */
  #joinKeys(): void {
    if (this.#keys !== undefined) return;
    this.#keys = Buffer.concat(this.#chunks, this.#bytes);
    this.#chunks = [];
  }
}
