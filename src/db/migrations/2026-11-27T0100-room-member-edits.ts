import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * How many times a room's members were added or removed one by one. A SCIM group's version
 * (its ETag) was told apart by the directory version of its last member change and its member
 * count; changes that commit together share one directory version, so a member added by one and
 * another swapped by the next would leave the group with two states under one version. The
 * count moves with every one of them.
 */
export async function up(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await sql`alter table rooms add column member_edits integer not null default 0`.execute(db);
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.alterTable('rooms').dropColumn('member_edits').execute();
}
