/**
 * An organization's users held in memory for searching, at one directory
 * version: every folded search key in one buffer, each user's kind, and where
 * each user stands in every sort order (as the database orders them). A term
 * is found by scanning the buffer, so its exact count and any page cost the
 * same for every term and every offset: no per-match row read, no sort. Pure:
 * a builder is fed what the database reads; src/services/search-indexes.ts
 * loads and keeps them.
 */
import { filterNeedsMembers, matchesFilter, SORT_FIELDS, type SignatoryFilter, type SortDirection, type SortField } from './signatory-rules.ts';

/** Ends every search key in the buffer: no stored key contains U+0000, so no term can match across two users. */
const END_OF_KEY = 0;

/** Beyond one candidate in this many users, a further term is scanned for, not checked user by user. */
const DENSE = 16;

/** Bits of a user's kind. */
const EXTERNAL = 1;
const NEEDS_INVITE = 2;
const ROOM_MEMBER = 4;

/** A user as the index is built from it: in ascending `seq` order. */
export interface IndexedUser {
  seq: number;
  searchKey: string;
  external: boolean;
  needsInvite: boolean;
}

/** The room's members among the indexed users, one bit each. */
export class RoomMembers {
  readonly #bits: Uint8Array;

  constructor(bits: Uint8Array) {
    this.#bits = bits;
  }

  has(user: number): boolean {
    return (this.#bits[user >> 3]! & (1 << (user & 7))) !== 0;
  }

  get bytes(): number {
    return this.#bits.byteLength;
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

/** Memory an index built from these parts holds, in bytes (its keys as a string of one byte per character). */
export function bytesOfParts(parts: SearchIndexParts): number {
  const { keys, starts, kinds, seqs, orders } = parts;
  return keys.byteLength + starts.byteLength + kinds.byteLength + seqs.byteLength + orders.lastname.byteLength + orders.firstname.byteLength + orders.email.byteLength;
}

export class SearchIndex {
  readonly version: number;
  /** Memory held, in bytes. */
  readonly bytes: number;
  /**
   * The keys' UTF-8 bytes, one character per byte (a one-byte string of the same length): byte-wise
   * substring search is then String#indexOf, whose calls cost a third of Buffer#indexOf's
   * (measured at a million users: a term in every key, 53–64 ms against 142–153 ms).
   */
  readonly #keys: string;
  readonly #starts: Int32Array;
  readonly #kinds: Uint8Array;
  readonly #seqs: Float64Array;
  readonly #orders: Readonly<Record<SortField, Int32Array>>;

  constructor(parts: SearchIndexParts) {
    this.version = parts.version;
    this.bytes = bytesOfParts(parts);
    this.#keys = Buffer.from(parts.keys.buffer, parts.keys.byteOffset, parts.keys.byteLength).toString('latin1');
    this.#starts = parts.starts;
    this.#kinds = parts.kinds;
    this.#seqs = parts.seqs;
    this.#orders = parts.orders;
  }

  get users(): number {
    return this.#seqs.length;
  }

  /** The user number of a seq, or -1 when no indexed user has it. */
  userOf(seq: number): number {
    return placeOf(this.#seqs, seq);
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

  /** The exact number of users matching, and the seqs of the page's users in order. */
  search(search: IndexSearch): { total: number; seqs: number[] } {
    const candidates = this.#matching(search.terms);
    const accepted = acceptedKinds(search.includeExternal, search.filter);
    const needsMembers = filterNeedsMembers(search.filter);
    if (needsMembers && search.members === undefined) throw new Error('this filter needs the room members');
    const members = needsMembers ? search.members : undefined;
    let total = 0;
    for (let user = 0; user < candidates.length; user++) {
      if (candidates[user] === 0) continue;
      const kind = this.#kinds[user]! | (members?.has(user) === true ? ROOM_MEMBER : 0);
      if (accepted[kind] === 1) total += 1;
      else candidates[user] = 0;
    }
    return { total, seqs: total > search.offset ? this.#page(candidates, search) : [] };
  }

  /** The page's seqs: the order is walked, in either direction, past `offset` candidates. */
  #page(candidates: Uint8Array, search: IndexSearch): number[] {
    const order = this.#orders[search.sortBy];
    const seqs: number[] = [];
    let skip = search.offset;
    const ascending = search.direction === 'ASC';
    for (let step = 0; step < order.length && seqs.length < search.size; step++) {
      const user = order[ascending ? step : order.length - 1 - step]!;
      if (candidates[user] === 0) continue;
      if (skip > 0) skip -= 1;
      else seqs.push(this.#seqs[user]!);
    }
    return seqs;
  }

  /** 1 for each user whose key contains every term; the longest term is scanned for, the others checked on its matches. */
  #matching(terms: readonly string[]): Uint8Array {
    const candidates = new Uint8Array(this.users);
    if (terms.length === 0) return candidates.fill(1);
    if (terms.some((term) => term.includes('\0'))) return candidates;
    const [first, ...rest] = [...terms].map((term) => Buffer.from(term, 'utf8').toString('latin1')).sort((a, b) => b.length - a.length);
    this.#scan(first!, candidates);
    for (const term of rest) {
      const left = candidates.reduce((sum, candidate) => sum + candidate, 0);
      if (left * DENSE > candidates.length) {
        // Many left: one more pass over the buffer costs less than a look at each.
        const also = new Uint8Array(candidates.length);
        this.#scan(term, also);
        for (let user = 0; user < candidates.length; user++) candidates[user]! &= also[user]!;
        continue;
      }
      for (let user = 0; user < candidates.length; user++) {
        if (candidates[user] === 1 && !this.#contains(user, term)) candidates[user] = 0;
      }
    }
    return candidates;
  }

  /** Whether the user's key contains the term: compared here, as keys are short (an indexOf could run on past the key). */
  #contains(user: number, term: string): boolean {
    const keys = this.#keys;
    const last = this.#starts[user + 1]! - 1 - term.length;
    const first = term.charCodeAt(0);
    for (let at = this.#starts[user]!; at <= last; at++) {
      if (keys.charCodeAt(at) !== first) continue;
      let length = 1;
      while (length < term.length && keys.charCodeAt(at + length) === term.charCodeAt(length)) length++;
      if (length === term.length) return true;
    }
    return false;
  }

  /** Marks every user whose key contains the term: one pass over the buffer, skipping to the next key after a match. */
  #scan(term: string, candidates: Uint8Array): void {
    const starts = this.#starts;
    let user = 0;
    let at = this.#keys.indexOf(term, 0);
    while (at >= 0) {
      user = this.#userAt(at, user);
      candidates[user] = 1;
      at = this.#keys.indexOf(term, starts[user + 1]!);
    }
  }

  /** The user whose key holds byte `at`, searching from `from` (matches come in order): a few steps, then halving. */
  #userAt(at: number, from: number): number {
    const starts = this.#starts;
    let user = from;
    for (let step = 0; step < 8; step++) {
      if (starts[user + 1]! > at) return user;
      user += 1;
    }
    let low = user;
    let high = starts.length - 2;
    while (low < high) {
      const middle = (low + high + 1) >>> 1;
      if (starts[middle]! <= at) low = middle;
      else high = middle - 1;
    }
    return low;
  }
}

/** Where `seq` is in the ascending `seqs`, or -1. */
function placeOf(seqs: Float64Array, seq: number): number {
  let low = 0;
  let high = seqs.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const value = seqs[middle]!;
    if (value === seq) return middle;
    if (value < seq) low = middle + 1;
    else high = middle - 1;
  }
  return -1;
}

/** For each of the 8 kinds (external, needs invite, room member), 1 if such a user is a candidate under the filter. */
function acceptedKinds(includeExternal: boolean, filter: SignatoryFilter): Uint8Array {
  const accepted = new Uint8Array(8);
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
      this.#kinds[this.#users] = (user.external ? EXTERNAL : 0) | (user.needsInvite ? NEEDS_INVITE : 0);
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
