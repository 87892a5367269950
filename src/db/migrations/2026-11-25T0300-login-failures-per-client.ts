import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * Failed logins are counted per username and client address, so that a stranger's failures
 * lock out the stranger, not the username's owner (OWASP's authentication cheat sheet). The
 * counts are short-lived throttle state: the table is made again, empty, rather than converted.
 * On PostgreSQL its change notice trigger comes back with it (signroom_notify_change exists).
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  await db.schema.dropTable('login_failures').execute();
  await createLoginFailures(db, dialect, ['username', 'client']);
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  await db.schema.dropTable('login_failures').execute();
  await createLoginFailures(db, dialect, ['username']);
}

async function createLoginFailures(db: Kysely<any>, dialect: DialectName, key: string[]): Promise<void> {
  const text = dialect === 'postgres' ? sql`text collate "C"` : 'text';
  let table = db.schema.createTable('login_failures').addColumn('username', text, (c) => c.notNull());
  if (key.includes('client')) table = table.addColumn('client', text, (c) => c.notNull());
  await table
    .addColumn('failures', 'integer', (c) => c.notNull())
    // Milliseconds since the epoch.
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('login_failures_key', key as never)
    .execute();
  await db.schema.createIndex('login_failures_by_window').on('login_failures').column('window_start').execute();
  if (dialect === 'postgres') {
    await sql`CREATE TRIGGER login_failures_notify_change
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON login_failures
      FOR EACH STATEMENT EXECUTE FUNCTION signroom_notify_change()`.execute(db);
  }
}
