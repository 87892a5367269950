import { sql, type ExpressionBuilder, type Kysely, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { containsAllTerms, hasNul, indexableTerms, inSearchIndex, notIndexed } from '../db/dialect-sql.ts';
import { dialectOf } from '../db/dialect.ts';
import type { Database } from '../db/tables.ts';
import { sortKeyOrder, type SignatoryFilter, type SortDirection, type SortField } from '../domain/signatory-rules.ts';

/** Everything that decides which candidates match, independent of paging. */
export interface CandidateCriteria {
  orgId: string;
  roomId: string;
  /** The organization's `externalSignatories` setting. */
  includeExternal: boolean;
  filter: SignatoryFilter;
  /** Folded search terms, each of which must match. */
  terms: readonly string[];
}

/**
 * How to find the page: walk the sort index and test each user (best when
 * matches are dense), start from the search index's matches and sort them
 * (best when they are few), or, for terms too short for the search index,
 * test every user and sort the matches (few matches: a walk could read most of
 * the organization before it finds 20 late-sorting ones). All give the same rows.
 */
export type PagePlan = 'walk-sort-index' | 'from-search-index' | 'sort-matches';

export interface SignatoryRow {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  needsInvite: boolean;
  roomMember: boolean;
}

const SORT_COLUMNS = {
  lastname: 'u.lastname_key',
  firstname: 'u.firstname_key',
  email: 'u.email_key',
} as const satisfies Record<SortField, string>;

type Users = ExpressionBuilder<Database & { u: Database['users'] }, 'u'>;

function isRoomMember(eb: Users, roomId: string) {
  return eb.exists(
    eb
      .selectFrom('room_members as m')
      .select(sql`1`.as('one'))
      .whereRef('m.org_id', '=', 'u.org_id')
      .where('m.room_id', '=', roomId)
      .whereRef('m.user_id', '=', 'u.id'),
  );
}

function candidates(db: Kysely<Database>, criteria: CandidateCriteria, plan: PagePlan) {
  const { filter, roomId } = criteria;
  const dialect = dialectOf(db);
  // No stored key contains U+0000, so a term with it matches nobody (and never reaches the SQL).
  const terms = criteria.terms.filter((term) => !hasNul(term));
  const indexable = plan === 'from-search-index' ? indexableTerms(terms) : [];
  let query =
    indexable.length > 0
      ? db
          .selectFrom('users as u')
          .where(notIndexed(dialect, sql.ref<string>('u.org_id')), '=', criteria.orgId)
          .where(inSearchIndex(dialect, { seq: sql.ref('u.seq'), searchKey: sql.ref('u.search_key') }, indexable))
      : db.selectFrom('users as u').where('u.org_id', '=', criteria.orgId);
  if (terms.length < criteria.terms.length) query = query.where(sql<SqlBool>`1 = 0`);
  if (!criteria.includeExternal || filter.external === false) query = query.where('u.external', '=', 0);
  if (filter.roomMember === true) query = query.where((eb) => isRoomMember(eb, roomId));
  if (filter.roomMember === false) query = query.where((eb) => eb.not(isRoomMember(eb, roomId)));
  if (filter.requiresInvitation === true) {
    query = query.where((eb) => eb.and([eb('u.needs_invite', '=', 1), eb.not(isRoomMember(eb, roomId))]));
  }
  if (filter.requiresInvitation === false) {
    query = query.where((eb) => eb.or([eb('u.needs_invite', '=', 0), isRoomMember(eb, roomId)]));
  }
  for (const condition of containsAllTerms(dialect, sql.ref('u.search_key'), terms)) {
    query = query.where(condition);
  }
  return query;
}

/** Whether the search index can narrow these criteria at all. */
export function canUseSearchIndex(criteria: CandidateCriteria): boolean {
  return indexableTerms(criteria.terms).length > 0;
}

/** The number of candidates matching the criteria. */
export async function countSignatories(db: Kysely<Database>, criteria: CandidateCriteria): Promise<number> {
  const row = await candidates(db, criteria, 'from-search-index')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/**
 * One page of matching candidates in the contract's total order. The page's
 * ids are found first, reading only what a sort index holds (org, sort keys,
 * id), and only those users are then read whole: skipping to a deep page reads
 * index entries, not a row per skipped user (measured on PostgreSQL at a
 * million users: the last page in 0.3 s instead of 3.3 s).
 */
export async function findSignatories(
  db: Kysely<Database>,
  criteria: CandidateCriteria,
  sort: { by: SortField; direction: SortDirection },
  limit: number,
  offset: number,
  plan: PagePlan,
): Promise<SignatoryRow[]> {
  const direction = sort.direction === 'ASC' ? 'asc' : 'desc';
  let page: SelectQueryBuilder<Database & { u: Database['users'] }, 'u', object> = candidates(db, criteria, plan);
  // Sorting matches: order by expressions no index provides, so the planner scans for matches
  // (on SQLite through the index holding every column tested and sorted) instead of walking a
  // sort index (measured, 1M users, term "ng": SQLite 680 -> 185 ms, PostgreSQL 2.0 -> 0.28 s).
  const dialect = dialectOf(db);
  const key = (column: 'u.lastname_key' | 'u.firstname_key' | 'u.email_key' | 'u.id') =>
    plan === 'sort-matches' ? notIndexed(dialect, sql.ref<string>(column)) : sql.ref<string>(column);
  for (const field of sortKeyOrder(sort.by)) page = page.orderBy(key(SORT_COLUMNS[field]), direction);
  const pageIds = page.orderBy(key('u.id'), direction).select('u.id as page_id').limit(limit).offset(offset);
  // A cross join: SQLite then loops over the page's ids, where with an inner join it walked the
  // whole organization along the sort index (to spare a sort of 20 rows) and probed the ids.
  let query = db
    .selectFrom(pageIds.as('p'))
    .crossJoin('users as u')
    .whereRef('u.id', '=', 'p.page_id')
    .where('u.org_id', '=', criteria.orgId);
  for (const field of sortKeyOrder(sort.by)) query = query.orderBy(SORT_COLUMNS[field], direction);
  const rows = await query
    .orderBy('u.id', direction)
    .select((eb) => [
      'u.id',
      'u.firstname',
      'u.lastname',
      'u.email',
      'u.needs_invite',
      isRoomMember(eb, criteria.roomId).as('room_member'),
    ])
    .execute();
  return rows.map((row) => ({
    id: row.id,
    firstname: row.firstname,
    lastname: row.lastname,
    email: row.email,
    needsInvite: row.needs_invite === 1,
    roomMember: Number(row.room_member) === 1,
  }));
}
