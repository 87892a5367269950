import { type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * SQLite: a term of one or two characters cannot use the trigram index, so it
 * is tested on every search key of the organization. Walking a sort index for
 * that read each user's row; this index holds every column such a scan tests
 * or sorts by (the key, the kind, the id for room membership, the sort keys),
 * so counting and sorting the matches read the index alone (the figures are in
 * docs/benchmarks.md). PostgreSQL is left as it is:
 * a btree entry must stay under about 2.7 kB, which long names could exceed.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'sqlite') return;
  await db.schema
    .createIndex('users_by_search_key')
    .on('users')
    .columns(['org_id', 'search_key', 'external', 'needs_invite', 'id', 'lastname_key', 'firstname_key', 'email_key'])
    .execute();
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'sqlite') return;
  await db.schema.dropIndex('users_by_search_key').execute();
}
