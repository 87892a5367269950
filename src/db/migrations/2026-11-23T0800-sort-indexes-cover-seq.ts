import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * PostgreSQL: the three sort indexes also carry `seq` (INCLUDE), so reading a
 * sort order as seqs, which loading the in-memory search index does for every
 * user, reads the index alone. Without it each user's row was fetched, in sort
 * order, scattered over the table, which is slow once the table does not fit
 * in PostgreSQL's buffer cache. SQLite indexes end with the rowid (`seq`)
 * already.
 */
const SORT_INDEXES = {
  users_by_lastname: ['org_id', 'lastname_key', 'firstname_key', 'email_key', 'id'],
  users_by_firstname: ['org_id', 'firstname_key', 'lastname_key', 'email_key', 'id'],
  users_by_email: ['org_id', 'email_key', 'lastname_key', 'firstname_key', 'id'],
} as const;

export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await recreate(db, true);
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await recreate(db, false);
}

/**
 * Builds the new indexes under names of their own first, and only then drops the old ones and
 * takes their names. Building holds a SHARE lock (lookups go on, writes wait); the ACCESS EXCLUSIVE
 * lock DROP INDEX takes is held from the drops to the commit only, not through the builds.
 */
async function recreate(db: Kysely<any>, withSeq: boolean): Promise<void> {
  const include = withSeq ? sql` INCLUDE (seq)` : sql``;
  for (const [name, columns] of Object.entries(SORT_INDEXES)) {
    await sql`CREATE INDEX ${sql.id(`${name}_new`)} ON users (${sql.join(columns.map((column) => sql.id(column)))})${include}`.execute(db);
  }
  for (const name of Object.keys(SORT_INDEXES)) {
    await sql`DROP INDEX ${sql.id(name)}`.execute(db);
    await sql`ALTER INDEX ${sql.id(`${name}_new`)} RENAME TO ${sql.id(name)}`.execute(db);
  }
}
