import type { Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * Each directory version an import made, with a random stamp: the pair names
 * one state of an organization's directory in any database (the version alone
 * repeats in another database, or in this one restored from a backup and
 * imported into again). A server keeps a copy of a large organization's search
 * index on disk under such a pair, and after a restart uses it only if the
 * database lists the pair, then lays over what changed since. Versions made
 * before this migration have no row: no copy is kept of them.
 */
export async function up(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema
    .createTable('directory_states')
    .addColumn('org_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('stamp', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('directory_states_pk', ['org_id', 'version'])
    .execute();
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.dropTable('directory_states').execute();
}
