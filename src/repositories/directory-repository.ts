import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';

export interface OrganizationRow {
  id: string;
  externalSignatories: boolean;
  directoryVersion: number;
}

/** Whether the room exists in that organization. */
export async function roomExists(db: Kysely<Database>, orgId: string, roomId: string): Promise<boolean> {
  const row = await db
    .selectFrom('rooms')
    .select('id')
    .where('org_id', '=', orgId)
    .where('id', '=', roomId)
    .executeTakeFirst();
  return row !== undefined;
}

/** The organization and whether the room exists in it, in one query; undefined for an unknown organization. */
export async function findLookupScope(
  db: Kysely<Database>,
  orgId: string,
  roomId: string,
): Promise<{ organization: OrganizationRow; roomExists: boolean } | undefined> {
  const row = await db
    .selectFrom('organizations as o')
    .select((eb) => [
      'o.id',
      'o.external_signatories',
      'o.directory_version',
      eb.exists(eb.selectFrom('rooms as r').select('r.id').whereRef('r.org_id', '=', 'o.id').where('r.id', '=', roomId)).as('room_exists'),
    ])
    .where('o.id', '=', orgId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    organization: { id: row.id, externalSignatories: row.external_signatories === 1, directoryVersion: Number(row.directory_version) },
    // 1/0 on SQLite, true/false on PostgreSQL.
    roomExists: Boolean(row.room_exists),
  };
}
