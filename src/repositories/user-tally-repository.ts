import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/tables.ts';
import type { Tally } from '../domain/signatory-rules.ts';

/** The organization's users and the room's members, tallied by kind (see the user_tallies migration). */
export async function findTallies(db: Kysely<Database>, orgId: string, roomId: string): Promise<{ organization: Tally[]; members: Tally[] }> {
  const rows = await db
    .selectFrom('user_tallies')
    .select(['room_id', 'external', 'needs_invite', 'users'])
    .where('org_id', '=', orgId)
    .where('room_id', 'in', ['', roomId])
    .execute();
  const tally = (row: (typeof rows)[number]): Tally => ({ external: row.external === 1, needsInvitation: row.needs_invite === 1, users: Number(row.users) });
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
    insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select org_id, '', external, needs_invite, count(*) from users ${ofOrganization(sql.ref('org_id'))}
    group by org_id, external, needs_invite`.execute(db);
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select m.org_id, m.room_id, u.external, u.needs_invite, count(*)
    from room_members m join users u on u.org_id = m.org_id and u.id = m.user_id
    ${ofOrganization(sql.ref('m.org_id'))}
    group by m.org_id, m.room_id, u.external, u.needs_invite`.execute(db);
}
