import { sql, type ExpressionBuilder, type Kysely, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { containsAllTerms, hasNul, indexableTerms, inSearchIndex, notIndexed } from '../db/dialect-sql.ts';
import { chunks } from '../db/chunks.ts';
import { dialectOf } from '../db/dialect.ts';
import type { Database } from '../db/tables.ts';
import { CANDIDATE_STATUSES, sortKeyOrder, type SignatoryFilter, type SortDirection, type SortField } from '../domain/signatory-rules.ts';

/** Everything that decides which candidates match, independent of paging. */
export interface CandidateCriteria {
  orgId: string;
  roomId: string;
  /** The organization's `externalSignatories` setting. */
  includeExternal: boolean;
  filter: SignatoryFilter;
  /** Folded search terms, each of which must match. */
  terms: readonly string[];
  /**
   * Whether the organization has users who are never candidates (suspended, deleted): only then
   * is the status tested, which the sort indexes do not hold (a deep page would read every row).
   */
  hasNonCandidates: boolean;
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

/** The folded column each sort field orders by. */
export const SORT_KEY_COLUMNS = {
  lastname: 'lastname_key',
  firstname: 'firstname_key',
  email: 'email_key',
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

/**
 * The room's members, as users `u`: SQLite loops over the room's member list and looks each user
 * up (a cross join fixes that order), which is far cheaper than testing every user of the
 * organization for membership. The member table is only a driver: what is selected is `u`'s.
 */
function roomMembers(db: Kysely<Database>, orgId: string, roomId: string): SelectQueryBuilder<Database & { u: Database['users'] }, 'u', object> {
  const joined = db
    .selectFrom('room_members as m')
    .crossJoin('users as u')
    .where('m.org_id', '=', orgId)
    .where('m.room_id', '=', roomId)
    .whereRef('u.org_id', '=', 'm.org_id')
    .whereRef('u.id', '=', 'm.user_id');
  return joined;
}

function candidates(db: Kysely<Database>, criteria: CandidateCriteria, plan: PagePlan) {
  const { filter, roomId } = criteria;
  const dialect = dialectOf(db);
  // No stored key contains U+0000, so a term with it matches nobody (and never reaches the SQL).
  const terms = criteria.terms.filter((term) => !hasNul(term));
  const indexable = plan === 'from-search-index' ? indexableTerms(terms) : [];
  // Terms too short for the search index are tested on every user: of the room's members only,
  // when only they can match.
  const membersOnly = filter.roomMember === true && indexable.length === 0 && plan !== 'walk-sort-index' && terms.length > 0;
  let query =
    indexable.length > 0
      ? db
          .selectFrom('users as u')
          .where(notIndexed(dialect, sql.ref<string>('u.org_id')), '=', criteria.orgId)
          .where(inSearchIndex(dialect, { seq: sql.ref('u.seq'), searchKey: sql.ref('u.search_key') }, indexable))
      : membersOnly
        ? roomMembers(db, criteria.orgId, roomId)
        : db.selectFrom('users as u').where('u.org_id', '=', criteria.orgId);
  if (terms.length < criteria.terms.length) query = query.where(sql<SqlBool>`1 = 0`);
  if (criteria.hasNonCandidates) query = query.where('u.status', 'in', CANDIDATE_STATUSES);
  if (!criteria.includeExternal || filter.external === false) query = query.where('u.external', '=', 0);
  if (filter.roomMember === true && !membersOnly) query = query.where((eb) => isRoomMember(eb, roomId));
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
 * index entries, not a row per skipped user.
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
  // sort index past every user that does not match (a few matches that sort late cost a walk of the whole organization).
  const dialect = dialectOf(db);
  const key = (column: 'u.lastname_key' | 'u.firstname_key' | 'u.email_key' | 'u.id') =>
    plan === 'sort-matches' ? notIndexed(dialect, sql.ref<string>(column)) : sql.ref<string>(column);
  for (const field of sortKeyOrder(sort.by)) page = page.orderBy(key(`u.${SORT_KEY_COLUMNS[field]}`), direction);
  const pageIds = page.orderBy(key('u.id'), direction).select('u.id as page_id').limit(limit).offset(offset);
  // A cross join: SQLite then loops over the page's ids, where with an inner join it walked the
  // whole organization along the sort index (to spare a sort of 20 rows) and probed the ids.
  return readPage(db, criteria, sort, (users) =>
    db.selectFrom(pageIds.as('p')).crossJoin(users).whereRef('u.id', '=', 'p.page_id').where('u.org_id', '=', criteria.orgId),
  );
}

/**
 * For lookups with search terms: every match's sort keys are collected in one
 * pass (from the search index, or over the organization for terms too short
 * for it), stopping after `upTo + 1`, then counted and sorted for the page.
 * Returns undefined when there are more than `upTo` (too many to sort: the
 * caller counts them and walks the sort index instead), else the exact total
 * and the page, from the one pass where counting and then finding the page
 * would take two.
 */
export async function findFewMatches(
  db: Kysely<Database>,
  criteria: CandidateCriteria,
  sort: { by: SortField; direction: SortDirection },
  limit: number,
  offset: number,
  upTo: number,
): Promise<{ total: number; rows: SignatoryRow[] } | undefined> {
  const direction = sort.direction === 'ASC' ? 'asc' : 'desc';
  // Starting from the search index when a term can use it, else testing every user.
  const matches = candidates(db, criteria, 'from-search-index')
    .select(['u.id', 'u.lastname_key', 'u.firstname_key', 'u.email_key'])
    .limit(upTo + 1);
  let found = db
    .with(
      (cte) => cte('m').materialized(),
      () => matches,
    )
    .selectFrom((eb) =>
      eb
        .selectFrom('m')
        .select((inner) => inner.fn.countAll<number>().as('total'))
        .as('t'),
    )
    .leftJoin(
      (eb) => {
        let page = eb.selectFrom('m').select(['m.id', 'm.lastname_key', 'm.firstname_key', 'm.email_key']);
        for (const field of sortKeyOrder(sort.by)) page = page.orderBy(`m.${SORT_KEY_COLUMNS[field]}`, direction);
        return page.orderBy('m.id', direction).limit(limit).offset(offset).as('p');
      },
      (join) => join.onTrue(),
    )
    .select(['t.total', 'p.id']);
  // A join keeps no order of its own: the page's order is asked for again.
  for (const field of sortKeyOrder(sort.by)) found = found.orderBy(`p.${SORT_KEY_COLUMNS[field]}`, direction);
  const page = await found.orderBy('p.id', direction).execute();
  const total = Number(page[0]?.total ?? 0);
  if (total > upTo) return undefined;
  const ids = page.flatMap((row) => (row.id === null ? [] : [row.id]));
  return { total, rows: await readUsersInOrder(db, criteria, 'id', ids) };
}

/** The users of the given seqs (the in-memory search index's page), read whole, in the order of the seqs. */
export async function findUsersBySeq(db: Kysely<Database>, criteria: CandidateCriteria, seqs: readonly number[]): Promise<SignatoryRow[]> {
  return readUsersInOrder(db, criteria, 'seq', seqs);
}

/** A user read outside a transaction, with what tells which directory versions it is as at (see findUsersWithChangesBySeq). */
export interface UserWithChanges {
  row: SignatoryRow;
  /** The version the user's shown fields or memberships last changed in. */
  changedIn: number;
  /** The version the room's member list was last replaced in (by an import); null when the room is gone. */
  membersChangedIn: number | null;
}

/**
 * The users of the given seqs in the organization, by seq, each with the version its shown fields
 * or memberships last changed in (`changed_in`) and the version the room's member list was last
 * replaced in (`members_changed_in`): read outside a transaction, a user is as it was at every
 * version from the later of the two on (see asAtVersion).
 */
export async function findUsersWithChangesBySeq(
  db: Kysely<Database>,
  orgId: string,
  roomId: string,
  seqs: readonly number[],
): Promise<Map<number, UserWithChanges>> {
  const found = new Map<number, UserWithChanges>();
  for (const batch of chunks(seqs, READ_BATCH)) {
    const read = await usersBy(db, orgId, roomId, 'seq', batch)
      .select((eb) => [
        'u.changed_in',
        eb.selectFrom('rooms as r').select('r.members_changed_in').whereRef('r.org_id', '=', 'u.org_id').where('r.id', '=', roomId).as('members_changed_in'),
      ])
      .execute();
    for (const user of read) {
      const membersChangedIn = user.members_changed_in === null ? null : Number(user.members_changed_in);
      found.set(Number(user.seq), { row: toSignatoryRow(user), changedIn: Number(user.changed_in), membersChangedIn });
    }
  }
  return found;
}

/**
 * The page's users as they were at directory version `version`, in the order of the seqs, or
 * undefined when one of them was not read or changed since (its fields, its memberships, or the
 * room's member list replaced): read outside a transaction, users no change touched after the
 * version are as they were at it, whatever else committed since.
 */
export function asAtVersion(users: ReadonlyMap<number, UserWithChanges>, seqs: readonly number[], version: number): SignatoryRow[] | undefined {
  const rows: SignatoryRow[] = [];
  for (const seq of seqs) {
    const user = users.get(seq);
    if (user === undefined || user.changedIn > version || user.membersChangedIn === null || user.membersChangedIn > version) return undefined;
    rows.push(user.row);
  }
  return rows;
}

/**
 * The users of the given ids or seqs, read whole, in the order given: a few hundred at a time (a
 * page may hold more than SQLite takes parameters), found by key and put in order here, so no
 * sort index tempts the planner into walking the organization.
 */
async function readUsersInOrder<K extends 'id' | 'seq'>(
  db: Kysely<Database>,
  criteria: CandidateCriteria,
  key: K,
  values: readonly (K extends 'id' ? string : number)[],
): Promise<SignatoryRow[]> {
  const position = new Map<string | number, number>(values.map((value, index) => [value, index]));
  const rows: { row: SignatoryRow; at: number }[] = [];
  for (const batch of chunks(values, READ_BATCH)) {
    const read = await usersBy(db, criteria.orgId, criteria.roomId, key, batch).execute();
    for (const user of read) rows.push({ row: toSignatoryRow(user), at: position.get(key === 'id' ? user.id : Number(user.seq))! });
  }
  return rows.sort((a, b) => a.at - b.at).map(({ row }) => row);
}

/** The users of the organization with these ids or seqs, as a lookup shows them (members of `roomId` or not), found by key. */
function usersBy<K extends 'id' | 'seq'>(db: Kysely<Database>, orgId: string, roomId: string, key: K, values: readonly (K extends 'id' ? string : number)[]) {
  // By seq, the organization's index must not drive the read (SQLite chose it and walked the organization).
  const orgRef = key === 'seq' ? notIndexed(dialectOf(db), sql.ref<string>('u.org_id')) : sql.ref<string>('u.org_id');
  return db
    .selectFrom('users as u')
    .where(orgRef, '=', orgId)
    .where(`u.${key}`, 'in', values as never[])
    .select((eb) => [...USER_COLUMNS, 'u.seq', isRoomMember(eb, roomId).as('room_member')]);
}

/** Ids per statement when users are read by id: well under SQLite's 32,766 bound parameters. */
const READ_BATCH = 500;

const USER_COLUMNS = ['u.id', 'u.firstname', 'u.lastname', 'u.email', 'u.needs_invite'] as const;

function toSignatoryRow(row: {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  needs_invite: number;
  room_member: unknown;
}): SignatoryRow {
  return {
    id: row.id,
    firstname: row.firstname,
    lastname: row.lastname,
    email: row.email,
    needsInvite: row.needs_invite === 1,
    roomMember: Number(row.room_member) === 1,
  };
}

/**
 * The page's users, read whole, in the contract's order; `pageUsers` picks them (as `u`). Ordered
 * by expressions no index provides: the few users are found by id, then sorted. Ordered by the
 * columns, SQLite could walk the organization's sort index to spare sorting them, which costs far
 * more than sorting a page.
 */
async function readPage(
  db: Kysely<Database>,
  criteria: CandidateCriteria,
  sort: { by: SortField; direction: SortDirection },
  pageUsers: (users: 'users as u') => SelectQueryBuilder<Database & { u: Database['users'] }, 'u', object>,
): Promise<SignatoryRow[]> {
  const direction = sort.direction === 'ASC' ? 'asc' : 'desc';
  const dialect = dialectOf(db);
  let query = pageUsers('users as u');
  for (const field of sortKeyOrder(sort.by)) query = query.orderBy(notIndexed(dialect, sql.ref<string>(`u.${SORT_KEY_COLUMNS[field]}`)), direction);
  const rows = await query
    .orderBy(notIndexed(dialect, sql.ref<string>('u.id')), direction)
    .select((eb) => [...USER_COLUMNS, isRoomMember(eb, criteria.roomId).as('room_member')])
    .execute();
  return rows.map(toSignatoryRow);
}
