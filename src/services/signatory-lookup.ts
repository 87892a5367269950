import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import { searchTerms } from '../domain/fold.ts';
import { effectivePageSize, pageOffset, toPage, type Page } from '../domain/paging.ts';
import {
  displayName,
  requiresInvitation,
  signatoryFilter,
  type Purpose,
  type SortDirection,
  type SortField,
} from '../domain/signatory-rules.ts';
import { ProblemError } from '../errors.ts';
import { findOrganization, roomExists } from '../repositories/directory-repository.ts';
import {
  canUseSearchIndex,
  countSignatories,
  findSignatories,
  type CandidateCriteria,
  type PagePlan,
  type SignatoryRow,
} from '../repositories/signatory-repository.ts';
import { LruCache } from './lru-cache.ts';

/** The validated query of a lookup request. */
export interface LookupRequest {
  searchQuery?: string | undefined;
  page: number;
  size: number;
  sortBy: SortField;
  sortDirection: SortDirection;
  roomMember?: boolean | undefined;
  requiresInvitation?: boolean | undefined;
  purpose?: Purpose | undefined;
}

/** A signatory as the API returns it. */
export interface Signatory {
  displayName: string;
  email: string;
  firstname: string | null;
  lastname: string | null;
  requiresInvitation: boolean;
  roomMember: boolean;
}

const COUNT_CACHE_ENTRIES = 10_000;
/** Signatories kept in cached pages for repeated lookups (about 60 MB). */
const PAGE_CACHE_ROWS = 200_000;
/** Up to this many search matches, the page is found by sorting them (see #plan). */
const SORT_MATCHES_UP_TO = 50_000;

/**
 * The signatory lookup of a room. Counts and pages are cached
 * per directory version of the organization: any change to its users, rooms,
 * members or settings bumps the version, so a cached answer is never stale and
 * never needs invalidating.
 */
export class SignatoryLookup {
  readonly #db: Kysely<Database>;
  readonly #maxPageSize: number;
  readonly #counts = new LruCache<string, number>(COUNT_CACHE_ENTRIES);
  readonly #pages = new LruCache<string, Signatory[]>(PAGE_CACHE_ROWS, (content) => Math.max(1, content.length));

  constructor(db: Kysely<Database>, maxPageSize: number) {
    this.#db = db;
    this.#maxPageSize = maxPageSize;
  }

  /** One page of the room's signatories; 404 problems for an unknown organization or room. */
  async lookup(orgId: string, roomId: string, request: LookupRequest): Promise<Page<Signatory>> {
    // One snapshot for the whole answer: an import committing meanwhile (from
    // another process) is seen entirely or not at all, by the total, the page and
    // the count cache, which is keyed by the directory version read here.
    return this.#db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute((trx) => this.#lookupIn(trx, orgId, roomId, request));
  }

  async #lookupIn(db: Kysely<Database>, orgId: string, roomId: string, request: LookupRequest): Promise<Page<Signatory>> {
    const organization = await findOrganization(db, orgId);
    if (organization === undefined) {
      throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
    }
    if (!(await roomExists(db, orgId, roomId))) {
      throw new ProblemError('room-not-found', `Signing room "${roomId}" does not exist in organization "${orgId}".`);
    }
    const criteria: CandidateCriteria = {
      orgId,
      roomId,
      includeExternal: organization.externalSignatories,
      filter: signatoryFilter(request),
      terms: searchTerms(request.searchQuery),
    };
    const pageRequest = { page: request.page, size: effectivePageSize(request.size, this.#maxPageSize) };
    const total = await this.#count(db, criteria, organization.directoryVersion);
    const offset = pageOffset(pageRequest);
    if (offset >= total) return toPage([], pageRequest, total);
    const sort = { by: request.sortBy, direction: request.sortDirection };
    // Like counts, pages are cached under the directory version: never stale.
    const pageKey = cacheKey([organization.directoryVersion, criteria, sort, pageRequest]);
    const cached = this.#pages.get(pageKey);
    if (cached !== undefined) return toPage(cached, pageRequest, total);
    const rows = await findSignatories(db, criteria, sort, pageRequest.size, offset, this.#plan(criteria, total));
    const content = rows.map(toSignatory);
    this.#pages.set(pageKey, content);
    return toPage(content, pageRequest, total);
  }

  /**
   * Starting from the search index reads and sorts every match, whatever the
   * page; walking the sort index stops after the page but may read many users
   * to get there (all of them when the term sorts late). Sorting is cheap up
   * to a few tens of thousands of matches; beyond that the matches are dense
   * enough that the walk finds a page quickly.
   */
  #plan(criteria: CandidateCriteria, matches: number): PagePlan {
    return canUseSearchIndex(criteria) && matches <= SORT_MATCHES_UP_TO ? 'from-search-index' : 'walk-sort-index';
  }

  async #count(db: Kysely<Database>, criteria: CandidateCriteria, directoryVersion: number): Promise<number> {
    const key = cacheKey([directoryVersion, criteria]);
    const cached = this.#counts.get(key);
    if (cached !== undefined) return cached;
    const count = await countSignatories(db, criteria);
    this.#counts.set(key, count);
    return count;
  }
}

/** Hashed, so a 10,000-character query costs a cache no more than a short one. */
function cacheKey(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64');
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
