import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * PostgreSQL: every statement that changes what a server keeps between
 * requests (credentials, failed logins, organizations with their directory
 * version, rooms) sends a notice on channel `signroom_changes` when its
 * transaction commits, so every server listening forgets what it kept.
 * SQLite needs none: `PRAGMA data_version` tells the same without asking.
 */
const WATCHED_TABLES = ['credentials', 'login_failures', 'organizations', 'rooms'];

export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  // Notices with the same channel and payload in one transaction are sent once.
  await sql`CREATE FUNCTION signroom_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('signroom_changes', '');
      RETURN NULL;
    END
  $$`.execute(db);
  for (const table of WATCHED_TABLES) {
    await sql`CREATE TRIGGER ${sql.id(`${table}_notify_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION signroom_notify_change()`.execute(db);
  }
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  for (const table of WATCHED_TABLES) {
    await sql`DROP TRIGGER ${sql.id(`${table}_notify_change`)} ON ${sql.table(table)}`.execute(db);
  }
  await sql`DROP FUNCTION signroom_notify_change()`.execute(db);
}
