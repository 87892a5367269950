import type { Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * SCIM clients look users and groups (signing rooms) up by `externalId` (contract section 9):
 * indexed, so the lookup an identity provider makes before every change reads one entry, not the
 * organization. Rooms keep the identity provider's id of the group they are.
 */
export async function up(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.createIndex('users_external_ids').on('users').columns(['org_id', 'external_id']).execute();
  await db.schema.alterTable('rooms').addColumn('external_id', 'text').execute();
  await db.schema.createIndex('rooms_external_ids').on('rooms').columns(['org_id', 'external_id']).execute();
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.dropIndex('rooms_external_ids').execute();
  await db.schema.alterTable('rooms').dropColumn('external_id').execute();
  await db.schema.dropIndex('users_external_ids').execute();
}
