import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * State that several signroom processes on one database must share: failed
 * logins (so the back-off holds across processes) and, on PostgreSQL, the
 * document bytes themselves (so every instance can read every document).
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  const text = dialect === 'postgres' ? sql`text collate "C"` : 'text';
  await db.schema
    .createTable('login_failures')
    .addColumn('username', text, (c) => c.primaryKey())
    .addColumn('failures', 'integer', (c) => c.notNull())
    // Milliseconds since the epoch.
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('login_failures_by_window').on('login_failures').column('window_start').execute();

  if (dialect === 'postgres') {
    await db.schema
      .createTable('blobs')
      .addColumn('sha256', text, (c) => c.primaryKey())
      .addColumn('bytes', 'bytea', (c) => c.notNull())
      .execute();
    // Documents are compressed already (PDF streams, PNG, JPEG): do not try again.
    await sql`ALTER TABLE blobs ALTER COLUMN bytes SET STORAGE EXTERNAL`.execute(db);
  }
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect === 'postgres') await db.schema.dropTable('blobs').execute();
  await db.schema.dropTable('login_failures').execute();
}
