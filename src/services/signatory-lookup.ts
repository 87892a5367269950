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
  countSignatories,
  findSignatories,
  type CandidateCriteria,
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

/**
 * The signatory lookup of a room. Counts are cached per directory version of
 * the organization: any change to its users, rooms, members or settings bumps
 * the version, so a cached count is never stale and never needs invalidating.
 */
export class SignatoryLookup {
  readonly #db: Kysely<Database>;
  readonly #maxPageSize: number;
  readonly #counts = new LruCache<string, number>(COUNT_CACHE_ENTRIES);

  constructor(db: Kysely<Database>, maxPageSize: number) {
    this.#db = db;
    this.#maxPageSize = maxPageSize;
  }

  /** One page of the room's signatories; 404 problems for an unknown organization or room. */
  async lookup(orgId: string, roomId: string, request: LookupRequest): Promise<Page<Signatory>> {
    const organization = await findOrganization(this.#db, orgId);
    if (organization === undefined) {
      throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
    }
    if (!(await roomExists(this.#db, orgId, roomId))) {
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
    const total = await this.#count(criteria, organization.directoryVersion);
    const offset = pageOffset(pageRequest);
    const rows =
      offset < total
        ? await findSignatories(
            this.#db,
            criteria,
            { by: request.sortBy, direction: request.sortDirection },
            pageRequest.size,
            offset,
          )
        : [];
    return toPage(rows.map(toSignatory), pageRequest, total);
  }

  async #count(criteria: CandidateCriteria, directoryVersion: number): Promise<number> {
    const key = JSON.stringify([
      criteria.orgId,
      directoryVersion,
      criteria.roomId,
      criteria.includeExternal,
      criteria.filter,
      criteria.terms,
    ]);
    const cached = this.#counts.get(key);
    if (cached !== undefined) return cached;
    const count = await countSignatories(this.#db, criteria);
    this.#counts.set(key, count);
    return count;
  }
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
