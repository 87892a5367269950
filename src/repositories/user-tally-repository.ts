import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/tables.ts';
import { CANDIDATE_STATUSES, type Tally } from '../domain/signatory-rules.ts';

/** The organization's users and the room's members, tallied by kind (see the user_tallies migration). */
export async function findTallies(db: Kysely<Database>, orgId: string, roomId: string): Promise<{ organization: Tally[]; members: Tally[] }> {
  const rows = await db
    .selectFrom('user_tallies')
    .select(['room_id', 'external', 'needs_invite', 'candidate', 'users'])
    .where('org_id', '=', orgId)
    .where('room_id', 'in', ['', roomId])
    .execute();
  const tally = (row: (typeof rows)[number]): Tally => ({ external: row.external === 1, needsInvitation: row.needs_invite === 1, candidate: row.candidate === 1, users: Number(row.users) });
  return {
    organization: rows.filter((row) => row.room_id === '').map(tally),
    members: rows.filter((row) => row.room_id !== '').map(tally),
  };
}

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

/** One change to a tally: `delta` users of `kind` into (or out of) the organization's (room '') or a room's. */
export interface TallyDelta {
  roomId: string;
  kind: TallyKind;
  delta: number;
}

/** The rooms a user is a member of (for moving it in their tallies). */
export async function findRoomsOfUser(db: Kysely<Database>, orgId: string, userId: string): Promise<string[]> {
  const rows = await db.selectFrom('room_members').select('room_id').where('org_id', '=', orgId).where('user_id', '=', userId).execute();
  return rows.map((row) => row.room_id);
}

/**
 * Applies tally deltas in one statement, summed by tally and in key order (so writers touching
 * the same tallies take their row locks in the same order), those that sum to nothing left out.
 */
export async function addToTallies(db: Kysely<Database>, orgId: string, deltas: readonly TallyDelta[]): Promise<void> {
  const sums = new Map<string, TallyDelta>();
  for (const { roomId, kind, delta } of deltas) {
    const key = JSON.stringify([roomId, kind.external, kind.needs_invite, kind.candidate]);
    const sum = sums.get(key);
    sums.set(key, { roomId, kind, delta: (sum?.delta ?? 0) + delta });
  }
  const rows = [...sums.entries()]
    .filter(([, sum]) => sum.delta !== 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, { roomId, kind, delta }]) => ({ org_id: orgId, room_id: roomId, external: kind.external, needs_invite: kind.needs_invite, candidate: kind.candidate, users: delta }));
  if (rows.length === 0) return;
  await db
    .insertInto('user_tallies')
    .values(rows)
    .onConflict((oc) => oc.columns(['org_id', 'room_id', 'external', 'needs_invite', 'candidate']).doUpdateSet((eb) => ({ users: eb(eb.ref('user_tallies.users'), '+', eb.ref('excluded.users')) })))
    .execute();
}
