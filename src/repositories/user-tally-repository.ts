import { sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/tables.ts';
import { dialectOf } from '../db/dialect.ts';
import { CANDIDATE_STATUSES } from '../domain/signatory-rules.ts';

/**
 * Tallies the organization's users and each room's members again: called by the import, in its
 * transaction, after writing. `mostOfTable`: its users are a large share of all users (a bulk
 * load), so they are counted in one pass over the table rather than looked up one by one from an
 * index that holds the organization's id: SQLite took the index (users_user_name_unique), and
 * went to the table for each of a million users in email order, 8.4 s of a 67 s import against
 * 1.2-1.4 s for the pass.
 */
export async function retallyOrganization(db: Kysely<Database>, orgId: string, options: { mostOfTable?: boolean } = {}): Promise<void> {
  await retally(db, orgId, options.mostOfTable === true);
}

/**
 * Tallies every organization again, in three statements: for an import of many organizations
 * that make a bulk load together, where three statements per organization cost more than
 * tallying the few others as well.
 */
export async function retallyAll(db: Kysely<Database>): Promise<void> {
  await retally(db, undefined, true);
}

/** Replaces the tallies of one organization, or of all of them; `scan`: the users are read in one pass over the table. */
async function retally(db: Kysely<Database>, orgId: string | undefined, scan: boolean): Promise<void> {
  // PostgreSQL's planner weighs a sequential scan by itself; SQLite prefers any index on org_id.
  const users = scan && dialectOf(db) === 'sqlite' ? sql`users not indexed` : sql`users`;
  const ofOrganization = (column: RawBuilder<unknown>) => (orgId === undefined ? sql`` : sql`where ${column} = ${orgId}`);
  let stale = db.deleteFrom('user_tallies');
  if (orgId !== undefined) stale = stale.where('org_id', '=', orgId);
  await stale.execute();
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select org_id, '', external, needs_invite, ${CANDIDATE}, count(*) from ${users} ${ofOrganization(sql.ref('org_id'))}
    group by org_id, external, needs_invite, ${CANDIDATE}`.execute(db);
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select m.org_id, m.room_id, u.external, u.needs_invite, ${MEMBER_CANDIDATE}, count(*)
    from room_members m join users u on u.org_id = m.org_id and u.id = m.user_id
    ${ofOrganization(sql.ref('m.org_id'))}
    group by m.org_id, m.room_id, u.external, u.needs_invite, ${MEMBER_CANDIDATE}`.execute(db);
}

/** 1 for a user whose status (the column `status`) may make it a candidate, 0 otherwise. */
function candidate(status: RawBuilder<unknown>): RawBuilder<number> {
  // Literals, not parameters: PostgreSQL matches the expression in the select list with the one in GROUP BY.
  return sql<number>`case when ${status} in (${sql.join(CANDIDATE_STATUSES.map((name) => sql.lit(name)))}) then 1 else 0 end`;
}
const CANDIDATE = candidate(sql.ref('status'));
const MEMBER_CANDIDATE = candidate(sql.ref('u.status'));

/** A user's kind, as the tallies count it. */
export interface TallyKind {
  external: number;
  needs_invite: number;
  candidate: number;
}

/**
 * Moves one user in the tallies of the organization and of every room it is a member of: out of
 * `from` (undefined: a new user), into `to` (undefined: gone), in one statement. For a single
 * write, where counting the organization again would read every user.
 */
export async function moveInTallies(
  db: Kysely<Database>,
  orgId: string,
  userId: string,
  from: TallyKind | undefined,
  to: TallyKind | undefined,
): Promise<void> {
  const move = userTallyMove(orgId, userId, from, to);
  if (move !== undefined) await move.execute(db);
}

/**
 * Runs `statement` (a write of the user's row that returns it) and moves the user in the tallies
 * as moveInTallies does: on PostgreSQL in one statement, the move a WITH of it (one round trip
 * fewer, made while the organization's writers wait); the statement's first row.
 */
export async function withTallyMove<Row>(
  db: Kysely<Database>,
  orgId: string,
  userId: string,
  from: TallyKind | undefined,
  to: TallyKind | undefined,
  statement: Compilable<Row> & { executeTakeFirstOrThrow(): Promise<Row> },
): Promise<Row> {
  const move = userTallyMove(orgId, userId, from, to);
  if (move === undefined) return statement.executeTakeFirstOrThrow();
  if (dialectOf(db) === 'postgres') {
    const { rows } = await sql<Row>`with tallied as (${move}) ${statement}`.execute(db);
    if (rows[0] === undefined) throw new Error('the user to write is gone');
    return rows[0];
  }
  const row = await statement.executeTakeFirstOrThrow();
  await move.execute(db);
  return row;
}

/** The statement of moveInTallies; undefined when the user stays of its kind. */
function userTallyMove(orgId: string, userId: string, from: TallyKind | undefined, to: TallyKind | undefined): RawBuilder<unknown> | undefined {
  if (from !== undefined && to !== undefined && sameKind(from, to)) return undefined;
  const moves = [...(from === undefined ? [] : [{ kind: from, delta: -1 }]), ...(to === undefined ? [] : [{ kind: to, delta: 1 }])];
  if (moves.length === 0) return undefined;
  return tallyStatement(
    sql`select ${orgId} as org_id, '' as room_id union all select org_id, room_id from room_members where org_id = ${orgId} and user_id = ${userId}`,
    moves,
  );
}

/** Counts a user of `kind` in, or out of (`delta` -1), a room's members. */
export async function moveInRoomTally(db: Kysely<Database>, orgId: string, roomId: string, kind: TallyKind, delta: 1 | -1): Promise<void> {
  await addToTallies(db, sql`select ${orgId} as org_id, ${roomId} as room_id`, [{ kind, delta }]);
}

/** Adds users of each kind to the organization's own tally (not its rooms'): `moves` of distinct kinds. */
export async function addToOrganizationTally(db: Kysely<Database>, orgId: string, moves: readonly TallyMove[]): Promise<void> {
  if (moves.length > 0) await addToTallies(db, sql`select ${orgId} as org_id, '' as room_id`, moves);
}

/** A number of users of one kind to add to a tally (negative: to take away). */
export interface TallyMove {
  kind: TallyKind;
  delta: number;
}

export function sameKind(a: TallyKind, b: TallyKind): boolean {
  return a.external === b.external && a.needs_invite === b.needs_invite && a.candidate === b.candidate;
}

/** Adds the `moves` (of distinct kinds) to the tallies of the (org_id, room_id) pairs `scopes` selects. */
async function addToTallies(db: Kysely<Database>, scopes: RawBuilder<unknown>, moves: readonly TallyMove[]): Promise<void> {
  await tallyStatement(scopes, moves).execute(db);
}

/** The statement of addToTallies, to be part of another (a PostgreSQL WITH). */
export function tallyStatement(scopes: RawBuilder<unknown>, moves: readonly TallyMove[]): RawBuilder<unknown> {
  // Typed: a parameter in a union is text to PostgreSQL until cast.
  const kinds = sql.join(
    moves.map(
      ({ kind, delta }) =>
        sql`select cast(${kind.external} as integer) as external, cast(${kind.needs_invite} as integer) as needs_invite, cast(${kind.candidate} as integer) as candidate, cast(${delta} as integer) as delta`,
    ),
    sql` union all `,
  );
  return sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select s.org_id, s.room_id, k.external, k.needs_invite, k.candidate, k.delta from (${scopes}) s cross join (${kinds}) k where true
    on conflict (org_id, room_id, external, needs_invite, candidate) do update set users = user_tallies.users + excluded.users`;
}
