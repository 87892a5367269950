import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/tables.ts';
import { CANDIDATE_STATUSES } from '../domain/signatory-rules.ts';

/** Tallies the organization's users and each room's members again: called by the import, in its transaction, after writing. */
export async function retallyOrganization(db: Kysely<Database>, orgId: string): Promise<void> {
  await retally(db, orgId);
}

/**
 * Tallies every organization again, in three statements: for an import of many organizations
 * that make a bulk load together, where three statements per organization cost more than
 * tallying the few others as well.
 */
export async function retallyAll(db: Kysely<Database>): Promise<void> {
  await retally(db, undefined);
}

/** Replaces the tallies of one organization, or of all of them. */
async function retally(db: Kysely<Database>, orgId: string | undefined): Promise<void> {
  const ofOrganization = (column: RawBuilder<unknown>) => (orgId === undefined ? sql`` : sql`where ${column} = ${orgId}`);
  let stale = db.deleteFrom('user_tallies');
  if (orgId !== undefined) stale = stale.where('org_id', '=', orgId);
  await stale.execute();
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select org_id, '', external, needs_invite, ${CANDIDATE}, count(*) from users ${ofOrganization(sql.ref('org_id'))}
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
 * `from` (undefined: a new user), into `to` (undefined: gone). For a single write, where counting
 * the organization again would read every user.
 */
export async function moveInTallies(
  db: Kysely<Database>,
  orgId: string,
  userId: string,
  from: TallyKind | undefined,
  to: TallyKind | undefined,
): Promise<void> {
  if (from !== undefined && to !== undefined && from.external === to.external && from.needs_invite === to.needs_invite && from.candidate === to.candidate)
    return;
  for (const [kind, delta] of [
    [from, -1],
    [to, 1],
  ] as const) {
    if (kind === undefined) continue;
    // The organization's tally and its rooms' in one statement: a round trip fewer per user written.
    await addToTally(
      db,
      sql`select ${orgId} as org_id, '' as room_id union all select org_id, room_id from room_members where org_id = ${orgId} and user_id = ${userId}`,
      kind,
      delta,
    );
  }
}

/** Counts a user of `kind` in, or out of (`delta` -1), a room's members. */
export async function moveInRoomTally(db: Kysely<Database>, orgId: string, roomId: string, kind: TallyKind, delta: 1 | -1): Promise<void> {
  await addToTally(db, sql`select ${orgId} as org_id, ${roomId} as room_id`, kind, delta);
}

/** Adds `delta` users of `kind` to the tallies of the (org_id, room_id) pairs `scopes` selects. */
async function addToTally(db: Kysely<Database>, scopes: RawBuilder<unknown>, kind: TallyKind, delta: number): Promise<void> {
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select s.org_id, s.room_id, ${kind.external}, ${kind.needs_invite}, ${kind.candidate}, ${delta} from (${scopes}) s where true
    on conflict (org_id, room_id, external, needs_invite, candidate) do update set users = user_tallies.users + excluded.users`.execute(db);
}
