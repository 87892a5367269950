import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * Which directory version last changed what the in-memory search index holds
 * of a user (its folded keys, external, needs an invitation), and of a room's
 * member list: a server holding an index of version N reads only what changed
 * since (`changed_in > N`, along the new partial index) and lays them over the index,
 * instead of reading a million users again. 0 for rows written before, and by
 * a directory's first load (no index can hold those users: the server checks
 * the count).
 */
export async function up(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('changed_in', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // Partial: a directory's first load marks nothing (0), so its million users cost the index nothing.
  await db.schema.createIndex('users_changed_in').on('users').columns(['org_id', 'changed_in']).where(sql.ref('changed_in'), '>', 0).execute();
  await db.schema
    .alterTable('rooms')
    .addColumn('members_changed_in', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.dropIndex('users_changed_in').execute();
  await db.schema.alterTable('users').dropColumn('changed_in').execute();
  await db.schema.alterTable('rooms').dropColumn('members_changed_in').execute();
}
