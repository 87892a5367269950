import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * SQLite: the trigram index keeps which users hold each trigram, not where in
 * the key (`detail=none`). A term of more than three characters is then looked
 * up as all of its trigrams rather than as a phrase, which may also find users
 * holding them apart; the exact substring test beside the index drops those.
 * The index is then much smaller and builds faster, and common 3-letter terms
 * read faster. The index is rebuilt here from the users table (the triggers
 * keep their name and stay).
 * PostgreSQL is left as it is.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'sqlite') return;
  await recreate(db, 'none');
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'sqlite') return;
  await recreate(db, 'full');
}

async function recreate(db: Kysely<any>, detail: 'none' | 'full'): Promise<void> {
  await sql`DROP TABLE users_search`.execute(db);
  await sql`CREATE VIRTUAL TABLE users_search USING fts5(
    search_key, content='users', content_rowid='seq', tokenize='trigram case_sensitive 1', detail=${sql.raw(detail)})`.execute(db);
  await sql`INSERT INTO users_search(users_search) VALUES ('rebuild')`.execute(db);
}
