import { hash } from 'node:crypto';
import type { Static } from 'typebox';
import type { LookupQuery, Signatory as SignatorySchema } from '../schemas/signatory-lookup.ts';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/tables.ts';
import { withParallelScans } from '../db/dialect-sql.ts';
import { searchTerms } from '../domain/fold.ts';
import { effectivePageSize, pageJson, pageOffset } from '../domain/paging.ts';
import {
  countFromTallies,
  displayName,
  filterNeedsMembers,
  requiresInvitation,
  signatoryFilter,
  type SortDirection,
  type SortField,
} from '../domain/signatory-rules.ts';
import { ProblemError } from '../errors.ts';
import { findLookupScope, LOOKUP_SCOPE_TABLES, roomScopeOf, type OrganizationRow, type RoomScope } from '../repositories/directory-repository.ts';
import {
  canUseSearchIndex,
  countSignatories,
  findFewMatches,
  findSignatories,
  findUsersBySeq,
  type CandidateCriteria,
  type PagePlan,
  type SignatoryRow,
} from '../repositories/signatory-repository.ts';
import { ChangeScopedCache, NO_CHANGE_SOURCE, type ChangeSource } from '../lib/change-scoped-cache.ts';
import { LruCache } from '../lib/lru-cache.ts';
import { SharedWork } from '../lib/shared-work.ts';
import { PageUserReads } from './page-user-reads.ts';
import type { RoomMembers, SearchIndex, SearchIndexes } from '../search-index/index.ts';
import type { IndexSearch } from '../domain/search-index.ts';

type LookupQueryFields = Static<typeof LookupQuery>;

/** A lookup's latest answer: its version, its JSON, and its page's users when it was computed from the index. */
interface LatestAnswer {
  version: number;
  json: Buffer;
  page?: PageUsers;
}

/** The users of a page: their seqs, their rows, and the rows as the page's `content` JSON. */
interface PageUsers {
  seqs: readonly number[];
  rows: readonly SignatoryRow[];
  contentJson: string;
}

/** The validated query of a lookup request: the schema's, with its defaults filled in. */
export type LookupRequest = LookupQueryFields & Required<Pick<LookupQueryFields, 'page' | 'size' | 'sortBy' | 'sortDirection'>>;

/** A signatory as the API returns it. */
export type Signatory = Static<typeof SignatorySchema>;

const COUNT_CACHE_ENTRIES = 10_000;
/** Bytes of page JSON kept for repeated lookups. */
const PAGE_CACHE_BYTES = 64 * 1024 * 1024;
/** Bytes of the latest answers kept beside them, to carry across versions. */
const LATEST_CACHE_BYTES = 32 * 1024 * 1024;
/** Users of pages kept, by organization, room and seq, to make pages of without a read (about 200 bytes each). */
const KNOWN_ROWS = 50_000;
/** Organization and room pairs whose scope is kept between requests. */
const SCOPE_CACHE_ENTRIES = 10_000;
/** Up to this many search matches, the page is found by sorting them (see #plan). */
const SORT_MATCHES_UP_TO = 50_000;
/**
 * A lookup waits at most this long for the organization's in-memory index, held, to take in what
 * just committed (one write: a millisecond or two; an import's few thousand changes: tens of
 * milliseconds): the database would take longer to answer terms (hundreds of milliseconds at a
 * million users), and walks its sort index for a page without terms at every version.
 */
const INDEX_CATCH_UP_MS = 300;

/**
 * The signatory lookup of a room. Counts and whole answers (JSON) are cached
 * per directory version of the organization: any change to its users, rooms,
 * members or settings bumps the version, so a cached answer is never stale and
 * never needs invalidating.
 */
export class SignatoryLookup {
  readonly #db: Kysely<Database>;
  readonly #maxPageSize: number;
  readonly #counts = new LruCache<string, number>(COUNT_CACHE_ENTRIES);
  /**
   * Whole answers, as UTF-8 JSON bytes: a page's JSON depends only on its cache key (the total is
   * the count under the same version). Bytes, not a string: a page with one non-Latin-1 name is a
   * two-byte string that would be encoded again on every send.
   */
  readonly #pages = new LruCache<string, Buffer>(PAGE_CACHE_BYTES, (json) => json.byteLength);
  /**
   * The latest answer of each lookup, whatever its version: carried to a later version when no
   * change since can touch it (SearchIndexes.unchangedFor), so steady writes to an organization
   * do not make every lookup of it be computed again.
   */
  // Rows as objects take several times their JSON; the content's JSON, two bytes a character at most.
  readonly #latest = new LruCache<string, LatestAnswer>(
    LATEST_CACHE_BYTES,
    (entry) => entry.json.byteLength + (entry.page === undefined ? 0 : 4 * entry.json.byteLength + 2 * entry.page.contentJson.length),
  );
  /** The users of answers computed from the index, by organization, room and seq, with the version they were shown at (see #knownUsers). */
  readonly #knownRows = new LruCache<string, { version: number; row: SignatoryRow }>(KNOWN_ROWS);
  /**
   * Answers being computed, by page key (of one version): after each write every connection asks
   * again at once, and one computation answers them all.
   */
  readonly #computing = new SharedWork<string, Buffer>();
  /** Organization (with its directory version) and room existence, kept while the database is unchanged. */
  readonly #scopes: ChangeScopedCache<string, { found: RoomScope | undefined }>;

  /** The users of pages computed again from the index that no earlier answer or change read holds, read for all the lookups of one moment at once. */
  readonly #pageUsers: PageUserReads;

  /** In-memory indexes of large organizations, for lookups with search terms; none: the database answers all. */
  readonly #indexes: SearchIndexes | undefined;

  constructor(db: Kysely<Database>, maxPageSize: number, options: { changes?: ChangeSource; indexes?: SearchIndexes } = {}) {
    this.#db = db;
    this.#maxPageSize = maxPageSize;
    // A lookup's scope is read from these tables, and from user_tallies, which every write changes
    // in the transaction that bumps its organization's version (or deletes a room).
    this.#scopes = new ChangeScopedCache((options.changes ?? NO_CHANGE_SOURCE).about(LOOKUP_SCOPE_TABLES), SCOPE_CACHE_ENTRIES);
    this.#indexes = options.indexes;
    this.#pageUsers = new PageUserReads(db);
  }

  /** One page of the room's signatories, as UTF-8 JSON; 404 problems for an unknown organization or room. */
  async lookup(orgId: string, roomId: string, request: LookupRequest, asOf = performance.now()): Promise<Buffer> {
    const pageRequest = { page: request.page, size: effectivePageSize(request.size, this.#maxPageSize) };
    const sort = { by: request.sortBy, direction: request.sortDirection };
    // A repeated lookup is answered from the caches once the current directory version is known
    // (a read, or the index's latest read of its changes); what is cached under a version is consistent.
    const scope = await this.#scope(this.#db, orgId, roomId, { cachedAsOf: asOf });
    const scopeKeys = lookupKeys(scope, request, pageRequest, sort);
    const cached = this.#pages.get(scopeKeys.page);
    if (cached !== undefined) return cached;
    // The same lookup under way at this version: its answer (of this version or a newer one) will do.
    return this.#computing.run(scopeKeys.page, undefined, () => this.#compute(scopeKeys, request, pageRequest, sort));
  }

  /** The answer of a lookup not kept, from the version its keys were read at or a newer one (see lookup). */
  async #compute(
    scopeKeys: LookupKeys,
    request: LookupRequest,
    pageRequest: { page: number; size: number },
    sort: { by: SortField; direction: SortDirection },
  ): Promise<Buffer> {
    const { orgId } = scopeKeys.criteria;
    const deadline = performance.now() + INDEX_CATCH_UP_MS;
    let keys = scopeKeys;
    let scopeReadAgain = false;
    for (;;) {
      // Just after a change, the organization's in-memory index may be a moment from its version.
      const waited = (await this.#indexes?.catchUp(orgId, keys.directoryVersion, deadline - performance.now())) === true;
      const carried = this.#carried(keys);
      if (carried !== undefined) return carried;
      const fromIndex = await this.#fromHeldIndex(keys, pageRequest, sort);
      if (fromIndex !== undefined) return fromIndex;
      // Under steady writes the index, brought up to date, may hold a version committed after the
      // scope was read: the scope read again (once) will most often be of the index's version, an
      // answer a moment newer than asked for and a read instead of a snapshot transaction.
      if (!scopeReadAgain && this.#indexes?.heldAhead(orgId, keys.directoryVersion) === true) {
        scopeReadAgain = true;
        const read = await this.#readAgain(this.#db, keys, request, pageRequest, sort, false);
        if (Buffer.isBuffer(read)) return read;
        keys = read.keys;
        continue;
      }
      const mayWait = waited && performance.now() < deadline;
      if (mayWait) {
        // Under steady writes the snapshot below most often only finds a newer version that the
        // index is about to reach, and the lookup waits for it again: a plain read of the scope
        // finds that in one round trip, where the snapshot's transaction takes three on PostgreSQL.
        const read = await this.#readAgain(this.#db, keys, request, pageRequest, sort, true);
        if (Buffer.isBuffer(read)) return read;
        if (read.waitFor) {
          keys = read.keys;
          continue;
        }
      }
      const answer = await this.#inSnapshot(keys, request, pageRequest, sort, mayWait);
      if (Buffer.isBuffer(answer)) return answer;
      keys = answer;
    }
  }

  /**
   * The answer, computed in one snapshot: an import committing meanwhile (from another process) is
   * seen entirely or not at all, by the total, the page and the cache keys, which carry the
   * directory version read in it. When that version is newer than the one `waited` for and the
   * index, held, is still behind it (`mayWait`: steady writes), the keys of that version instead,
   * to wait for the index again rather than answer from the database (a scan for terms, a sort-index walk without).
   */
  async #inSnapshot(
    waited: LookupKeys,
    request: LookupRequest,
    pageRequest: { page: number; size: number },
    sort: { by: SortField; direction: SortDirection },
    mayWait: boolean,
  ): Promise<Buffer | LookupKeys> {
    return this.#db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(async (trx) => {
        const read = await this.#readAgain(trx, waited, request, pageRequest, sort, mayWait);
        if (Buffer.isBuffer(read)) return read;
        const { keys } = read;
        if (read.waitFor) return keys;
        const { total, rows } = await this.#totalAndPage(trx, keys, sort, pageRequest.size, pageOffset(pageRequest));
        return this.#kept(keys, pageRequest, total, rows);
      });
  }

  /**
   * The lookup's scope read again, in `db` (a snapshot's transaction, or none), and what it
   * settles: the answer kept or carried at its version; else its keys, and (`waitFor`) whether,
   * when `mayWait`, they are of a version newer than `waited` that the held index is still behind.
   */
  async #readAgain(
    db: Kysely<Database>,
    waited: LookupKeys,
    request: LookupRequest,
    pageRequest: { page: number; size: number },
    sort: { by: SortField; direction: SortDirection },
    mayWait: boolean,
  ): Promise<Buffer | { keys: LookupKeys; waitFor: boolean }> {
    const { orgId, roomId } = waited.criteria;
    const keys = lookupKeys(await this.#scope(db, orgId, roomId), request, pageRequest, sort);
    const kept = this.#pages.get(keys.page) ?? this.#carried(keys);
    if (kept !== undefined) return kept;
    const newer = keys.directoryVersion > waited.directoryVersion;
    return { keys, waitFor: mayWait && newer && this.#indexes?.heldBehind(orgId, keys.directoryVersion) === true };
  }

  /**
   * The answer without a transaction, when the organization's index is held at exactly the
   * lookup's version (with the room's members, if the filter needs them): the total and the page's
   * seqs from the index (without terms, the total from the tallies read with the scope), and the
   * page's users from earlier answers and the index's change reads (#knownUsers), or else in one
   * statement shared with the other lookups computed at the moment, which tells whether they are
   * still as they were at that version (PageUserReads): commits since that touch none of them do
   * not matter. Undefined when one of them changed since (the snapshot answers) or the index is
   * not held. Under steady writes most answers are computed again here, most of them without a
   * read (on PostgreSQL, a read is a share of one round trip instead of five: the transaction,
   * the scope, the count, the users, the commit).
   */
  async #fromHeldIndex(
    keys: LookupKeys,
    pageRequest: { page: number; size: number },
    sort: { by: SortField; direction: SortDirection },
  ): Promise<Buffer | undefined> {
    const found = this.#heldIndex(keys, false);
    if (found === undefined) return undefined;
    const { criteria } = keys;
    const query = indexQuery(keys, found.members, sort, pageRequest.size, pageOffset(pageRequest));
    let page: { total: number; seqs: number[] };
    if (criteria.terms.length > 0) page = found.index.search({ terms: criteria.terms, ...query });
    else {
      const total = countWithoutTerms(keys);
      page = { total, seqs: query.offset >= total ? [] : (this.#standingPage(keys, query) ?? found.index.pageWithoutTerms(query)) };
    }
    const latest = page.seqs.length === 0 ? undefined : this.#latestUsers(keys, page.seqs);
    const rows =
      page.seqs.length === 0
        ? []
        : (latest?.rows ??
          this.#knownUsers(keys, page.seqs) ??
          (await this.#pageUsers.read(criteria.orgId, criteria.roomId, page.seqs, keys.directoryVersion)));
    if (rows === undefined) return undefined;
    this.#counts.set(cacheKey([keys.directoryVersion, criteria]), page.total);
    return this.#kept(keys, pageRequest, page.total, rows, { seqs: page.seqs, contentJson: latest?.contentJson });
  }

  /**
   * The seqs of the lookup's latest page (without terms, and full) when it is its page at this
   * version too (SearchIndexes.pageStands): beside 200 writes/s the walks of the order that found
   * each version's pages again took about 6% of a lookup server's time, and found the same users.
   */
  #standingPage(keys: LookupKeys, query: Omit<IndexSearch, 'terms'>): number[] | undefined {
    const latest = this.#latest.get(keys.query);
    if (latest?.page === undefined || latest.version >= keys.directoryVersion || latest.page.seqs.length !== query.size) return undefined;
    const { orgId, roomId, terms } = keys.criteria;
    const stands = this.#indexes?.pageStands(orgId, latest.version, keys.directoryVersion, { roomId, terms, ...query }, latest.page.seqs);
    return stands === true ? [...latest.page.seqs] : undefined;
  }

  /**
   * The users of the lookup's latest answer, if its page holds the same users (`seqs`) and none
   * of them changed since (SearchIndexes.usersUnchanged): under steady writes most pages stay as
   * they were while their totals move, and need no read of their users nor JSON of their own.
   */
  #latestUsers(keys: LookupKeys, seqs: readonly number[]): PageUsers | undefined {
    const latest = this.#latest.get(keys.query);
    if (latest?.page === undefined || latest.version >= keys.directoryVersion) return undefined;
    const kept = latest.page.seqs;
    if (kept.length !== seqs.length || kept.some((seq, k) => seq !== seqs[k])) return undefined;
    const { orgId, roomId } = keys.criteria;
    return this.#indexes?.usersUnchanged(orgId, latest.version, keys.directoryVersion, roomId, seqs) === true ? latest.page : undefined;
  }

  /**
   * The users of a page (`seqs`) at the lookup's version without a read, when each is either a
   * user of an answer computed from the index since which nothing changed it, or one the index's
   * latest change reads found (SearchIndexes.changedUserAt): under steady writes a page's users
   * move by one when a user just created or renamed comes onto it, and the rest were on it before.
   * Undefined when one of them is neither: the page's users are read.
   */
  #knownUsers(keys: LookupKeys, seqs: readonly number[]): SignatoryRow[] | undefined {
    const indexes = this.#indexes;
    if (indexes === undefined) return undefined;
    const { orgId, roomId } = keys.criteria;
    const version = keys.directoryVersion;
    const rows: SignatoryRow[] = [];
    for (const seq of seqs) {
      const known = this.#knownRows.get(knownRowKey(orgId, roomId, seq));
      if (known !== undefined && known.version <= version && indexes.usersUnchanged(orgId, known.version, version, roomId, [seq])) {
        rows.push(known.row);
        continue;
      }
      const changed = indexes.changedUserAt(orgId, version, roomId, seq);
      if (changed?.shown === undefined || changed.rooms === undefined) return undefined;
      rows.push({ id: changed.id, ...changed.shown, needsInvite: changed.needsInvite, roomMember: changed.rooms.includes(roomId) });
    }
    return rows;
  }

  /**
   * The answer's JSON, kept under its version and as the lookup's latest (with its users' seqs and
   * rows, when known from the index); `fromIndex.contentJson`: the JSON of these rows, when a
   * latest answer had them.
   */
  #kept(
    keys: LookupKeys,
    pageRequest: { page: number; size: number },
    total: number,
    rows: readonly SignatoryRow[],
    fromIndex?: { seqs: readonly number[]; contentJson: string | undefined },
  ): Buffer {
    const contentJson = fromIndex?.contentJson ?? JSON.stringify(rows.map(toSignatory));
    const json = Buffer.from(pageJson(contentJson, rows.length, pageRequest, total));
    this.#pages.set(keys.page, json);
    if (fromIndex !== undefined) {
      const { orgId, roomId } = keys.criteria;
      rows.forEach((row, k) => this.#knownRows.set(knownRowKey(orgId, roomId, fromIndex.seqs[k]!), { version: keys.directoryVersion, row }));
    }
    const latest = this.#latest.get(keys.query);
    if (latest === undefined || latest.version < keys.directoryVersion)
      this.#latest.set(keys.query, {
        version: keys.directoryVersion,
        json,
        ...(fromIndex !== undefined ? { page: { seqs: fromIndex.seqs, rows, contentJson } } : {}),
      });
    return json;
  }

  /** The latest answer of this lookup, if no change since its version can touch it (kept under the current version from then on). */
  #carried(keys: LookupKeys): Buffer | undefined {
    const latest = this.#latest.get(keys.query);
    if (latest === undefined || latest.version >= keys.directoryVersion || this.#indexes === undefined) return undefined;
    const { criteria } = keys;
    const query = { roomId: criteria.roomId, terms: criteria.terms, includeExternal: criteria.includeExternal, filter: criteria.filter };
    if (!this.#indexes.unchangedFor(criteria.orgId, latest.version, keys.directoryVersion, query)) return undefined;
    this.#pages.set(keys.page, latest.json);
    this.#latest.set(keys.query, { ...latest, version: keys.directoryVersion });
    return latest.json;
  }

  /**
   * The organization (with its directory version) and room, or the 404 problem;
   * `cachedAsOf`: as kept from an earlier request if the database is unchanged
   * since that moment, or (an organization whose index is held) as read with the
   * changes the index took in since (never inside the snapshot, which must read its own).
   */
  async #scope(db: Kysely<Database>, orgId: string, roomId: string, options: { cachedAsOf?: number } = {}): Promise<LookupScope> {
    const read = async () => ({ found: await findLookupScope(db, orgId, roomId) });
    const asOf = options.cachedAsOf;
    // An organization whose index is held: its scope as read with the changes the index takes in.
    const withChanges = asOf !== undefined ? await this.#indexes?.scopeAsOf(orgId, roomId, asOf, INDEX_CATCH_UP_MS) : undefined;
    let scope = withChanges !== undefined ? roomScopeOf(withChanges, roomId) : undefined;
    if (scope === undefined) {
      scope = (asOf !== undefined ? await this.#scopes.read(`${orgId}\0${roomId}`, read, asOf) : await read()).found;
      // From the index's next update on, read with its changes.
      if (asOf !== undefined && scope?.roomExists === true) this.#indexes?.askScope(orgId, roomId);
    }
    if (scope === undefined) throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
    if (!scope.roomExists) throw new ProblemError('room-not-found', `Signing room "${roomId}" does not exist in organization "${orgId}".`);
    return { ...scope.organization, roomId, tallies: scope.tallies };
  }

  /**
   * Starting from the search index reads and sorts every match, whatever the
   * page; walking the sort index stops after the page but may read many users
   * to get there (all of them when the term sorts late). Sorting is cheap up
   * to a few tens of thousands of matches; beyond that the matches are dense
   * enough that the walk finds a page quickly. Terms too short for the search
   * index are tested on every user, and their few matches sorted likewise.
   */
  #plan(criteria: CandidateCriteria, matches: number): PagePlan {
    if (matches > SORT_MATCHES_UP_TO) return 'walk-sort-index';
    if (canUseSearchIndex(criteria)) return 'from-search-index';
    return criteria.terms.length > 0 ? 'sort-matches' : 'walk-sort-index';
  }

  /**
   * The exact number of matches (cached under the directory version) and the page's rows. With
   * search terms, a first pass collects few matches, counted and sorted at once; only when there
   * are many is the count a pass of its own, after which the sort index finds their page quickly.
   */
  async #totalAndPage(
    db: Transaction<Database>,
    keys: LookupKeys,
    sort: { by: SortField; direction: SortDirection },
    size: number,
    offset: number,
  ): Promise<{ total: number; rows: SignatoryRow[] }> {
    const countKey = cacheKey([keys.directoryVersion, keys.criteria]);
    const fromIndex = keys.criteria.terms.length > 0 ? this.#searchIndex(keys, sort, size, offset) : undefined;
    if (fromIndex !== undefined) {
      this.#counts.set(countKey, fromIndex.total);
      return { total: fromIndex.total, rows: fromIndex.seqs.length === 0 ? [] : await findUsersBySeq(db, keys.criteria, fromIndex.seqs) };
    }
    let total = this.#counts.get(countKey);
    if (total === undefined && keys.criteria.terms.length > 0) {
      const few = await withParallelScans(db, () => findFewMatches(db, keys.criteria, sort, size, offset, SORT_MATCHES_UP_TO));
      if (few !== undefined) {
        this.#counts.set(countKey, few.total);
        return few;
      }
    }
    if (total === undefined) {
      const criteria = keys.criteria;
      total = criteria.terms.length > 0 ? await withParallelScans(db, () => countSignatories(db, criteria)) : countWithoutTerms(keys);
      this.#counts.set(countKey, total);
    }
    if (offset >= total) return { total, rows: [] };
    const seqs = keys.criteria.terms.length === 0 ? this.#pageFromIndex(keys, sort, size, offset) : undefined;
    if (seqs !== undefined) return { total, rows: await findUsersBySeq(db, keys.criteria, seqs) };
    return { total, rows: await findSignatories(db, keys.criteria, sort, size, offset, this.#plan(keys.criteria, total)) };
  }

  /**
   * The page's seqs of a lookup without terms from the organization's in-memory index, held at
   * exactly this version: its orders are walked to the page (the first pages in microseconds),
   * where the database walks its sort index at every version under steady writes.
   */
  #pageFromIndex(keys: LookupKeys, sort: { by: SortField; direction: SortDirection }, size: number, offset: number): number[] | undefined {
    const found = this.#heldIndex(keys, false);
    if (found === undefined) return undefined;
    return found.index.pageWithoutTerms(indexQuery(keys, found.members, sort, size, offset));
  }

  /**
   * The organization's index at exactly the lookup's version, with the room's members if its filter
   * needs them; `mayLoad`: if not held, have it loaded (lookups with terms; the database answers a
   * page without terms well enough, so those never queue a load).
   */
  #heldIndex(keys: LookupKeys, mayLoad = true): { index: SearchIndex; members: RoomMembers | undefined } | undefined {
    const { criteria } = keys;
    const index = mayLoad ? this.#indexes?.index(criteria.orgId, keys.directoryVersion) : this.#indexes?.heldAt(criteria.orgId, keys.directoryVersion);
    if (index === undefined) return undefined;
    const members = filterNeedsMembers(criteria.filter) ? this.#indexes!.members(criteria.orgId, index, criteria.roomId) : undefined;
    if (filterNeedsMembers(criteria.filter) && members === undefined) return undefined;
    return { index, members };
  }

  /**
   * The total and the page's seqs from the organization's in-memory index, when one is held at
   * exactly the version this lookup reads (with the room's members, if the filter needs them):
   * a common term is answered there without the database reading and sorting all its matches.
   */
  #searchIndex(
    keys: LookupKeys,
    sort: { by: SortField; direction: SortDirection },
    size: number,
    offset: number,
  ): { total: number; seqs: number[] } | undefined {
    const found = this.#heldIndex(keys);
    if (found === undefined) return undefined;
    return found.index.search({ terms: keys.criteria.terms, ...indexQuery(keys, found.members, sort, size, offset) });
  }
}

function knownRowKey(orgId: string, roomId: string, seq: number): string {
  return `${orgId}\0${roomId}\0${seq}`;
}

/** What the in-memory index is asked for a page, terms aside. */
function indexQuery(
  { criteria }: LookupKeys,
  members: RoomMembers | undefined,
  sort: { by: SortField; direction: SortDirection },
  size: number,
  offset: number,
): Omit<IndexSearch, 'terms'> {
  return { includeExternal: criteria.includeExternal, filter: criteria.filter, members, sortBy: sort.by, direction: sort.direction, offset, size };
}

/** The candidates of a lookup without terms, counted from the tallies read with its scope (of its version). */
function countWithoutTerms({ criteria, tallies }: LookupKeys): number {
  return countFromTallies(tallies.organization, tallies.members, criteria.includeExternal, criteria.filter);
}

/** The criteria of a lookup and its answer's cache key, under the directory version they were read with (the count's key is made only on a miss). */
interface LookupKeys {
  criteria: CandidateCriteria;
  directoryVersion: number;
  /** The organization's users and the room's members by kind at that version: a lookup without terms is counted from them. */
  tallies: LookupScope['tallies'];
  page: string;
  /** The same lookup at any version. */
  query: string;
}

/** The organization and room a lookup reads, with their tallies, at one directory version. */
type LookupScope = OrganizationRow & { roomId: string; tallies: RoomScope['tallies'] };

function lookupKeys(
  scope: LookupScope,
  request: LookupRequest,
  pageRequest: { page: number; size: number },
  sort: { by: SortField; direction: SortDirection },
): LookupKeys {
  const criteria: CandidateCriteria = {
    orgId: scope.id,
    roomId: scope.roomId,
    includeExternal: scope.externalSignatories,
    filter: signatoryFilter(request),
    terms: searchTerms(request.searchQuery),
    hasNonCandidates: scope.hasNonCandidates,
  };
  const query = cacheKey([criteria, sort, pageRequest]);
  return { criteria, directoryVersion: scope.directoryVersion, tallies: scope.tallies, page: `${scope.directoryVersion}:${query}`, query };
}

/**
 * The parts as JSON, or its SHA-256 when that is long: a 10,000-character query costs a cache no
 * more than a short one, and the usual key (about 200 characters) costs no hash on the hot path
 * of cached answers (docs/benchmarks.md, "The lookup's hot path").
 */
function cacheKey(parts: unknown[]): string {
  const json = JSON.stringify(parts);
  return json.length <= 256 ? json : hash('sha256', json, 'base64');
}

function toSignatory(row: SignatoryRow): Signatory {
  return {
    displayName: displayName(row),
    email: row.email,
    firstname: row.firstname,
    lastname: row.lastname,
    requiresInvitation: requiresInvitation(row.roomMember, row.needsInvite),
    roomMember: row.roomMember,
  };
}
