import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';

export interface OrganizationRow {
  id: string;
  externalSignatories: boolean;
  directoryVersion: number;
}

/** The organization with the settings the lookup needs, or undefined. */
export async function findOrganization(db: Kysely<Database>, orgId: string): Promise<OrganizationRow | undefined> {
  const row = await db
    .selectFrom('organizations')
    .select(['id', 'external_signatories', 'directory_version'])
    .where('id', '=', orgId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    id: row.id,
    externalSignatories: row.external_signatories === 1,
    directoryVersion: Number(row.directory_version),
  };
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
