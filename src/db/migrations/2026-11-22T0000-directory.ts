import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  // PostgreSQL compares text by the database's locale unless told otherwise; ids,
  // keys and emails must compare by code point (UTF-8 bytes), as SQLite does.
  const text = dialect === 'postgres' ? sql`text collate "C"` : 'text';

  await db.schema
    .createTable('organizations')
    .addColumn('id', text, (c) => c.primaryKey())
    .addColumn('name', text, (c) => c.notNull())
    .addColumn('external_signatories', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('directory_version', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();

  await db.schema
    .createTable('users')
    // A stable integer key (SQLite's rowid) for the full-text index to point at.
    .addColumn('seq', 'integer', (c) => (dialect === 'postgres' ? c.generatedByDefaultAsIdentity().primaryKey() : c.primaryKey()))
    .addColumn('org_id', text, (c) => c.notNull().references('organizations.id'))
    .addColumn('id', text, (c) => c.notNull())
    .addColumn('firstname', text)
    .addColumn('lastname', text)
    .addColumn('email', text, (c) => c.notNull())
    .addColumn('email_lower', text, (c) => c.notNull())
    .addColumn('external', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('status', text, (c) => c.notNull().defaultTo('active'))
    .addColumn('needs_invite', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('firstname_key', text, (c) => c.notNull())
    .addColumn('lastname_key', text, (c) => c.notNull())
    .addColumn('email_key', text, (c) => c.notNull())
    .addColumn('search_key', text, (c) => c.notNull())
    .addUniqueConstraint('users_org_id_unique', ['org_id', 'id'])
    .execute();
  await db.schema.createIndex('users_email_unique').unique().on('users').columns(['org_id', 'email_lower']).execute();
  // One index per sort field, in the contract's full sort-key order, so every
  // page is read in order from an index (either direction) without sorting.
  await db.schema.createIndex('users_by_lastname').on('users').columns(['org_id', 'lastname_key', 'firstname_key', 'email_key', 'id']).execute();
  await db.schema.createIndex('users_by_firstname').on('users').columns(['org_id', 'firstname_key', 'lastname_key', 'email_key', 'id']).execute();
  await db.schema.createIndex('users_by_email').on('users').columns(['org_id', 'email_key', 'lastname_key', 'firstname_key', 'id']).execute();

  if (dialect === 'postgres') {
    // Substring search: a trigram GIN index over the folded search key, which
    // `LIKE '%term%'` uses for terms of three characters or more.
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
    await sql`CREATE INDEX users_search_trgm ON users USING gin (search_key gin_trgm_ops)`.execute(db);
  } else {
    await createSqliteSearchIndex(db);
  }

  await db.schema
    .createTable('rooms')
    .addColumn('org_id', text, (c) => c.notNull().references('organizations.id'))
    .addColumn('id', text, (c) => c.notNull())
    .addColumn('name', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('rooms_pk', ['org_id', 'id'])
    .execute();

  await db.schema
    .createTable('room_members')
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('user_id', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('room_members_pk', ['org_id', 'room_id', 'user_id'])
    .addForeignKeyConstraint('room_members_room_fk', ['org_id', 'room_id'], 'rooms', ['org_id', 'id'])
    .addForeignKeyConstraint('room_members_user_fk', ['org_id', 'user_id'], 'users', ['org_id', 'id'])
    .execute();

  await db.schema
    .createTable('credentials')
    .addColumn('username', text, (c) => c.primaryKey())
    .addColumn('password_hash', text, (c) => c.notNull())
    .addColumn('organizations', text, (c) => c.notNull())
    .addColumn('updated_at', text, (c) => c.notNull())
    .execute();
}

/**
 * Substring search on SQLite: an FTS5 trigram index over the folded search key,
 * kept in step by triggers. Case-sensitive because the key is folded already.
 */
async function createSqliteSearchIndex(db: Kysely<any>): Promise<void> {
  await sql`CREATE VIRTUAL TABLE users_search USING fts5(
    search_key, content='users', content_rowid='seq', tokenize='trigram case_sensitive 1')`.execute(db);
  await sql`CREATE TRIGGER users_search_insert AFTER INSERT ON users BEGIN
    INSERT INTO users_search(rowid, search_key) VALUES (new.seq, new.search_key);
  END`.execute(db);
  await sql`CREATE TRIGGER users_search_delete AFTER DELETE ON users BEGIN
    INSERT INTO users_search(users_search, rowid, search_key) VALUES ('delete', old.seq, old.search_key);
  END`.execute(db);
  await sql`CREATE TRIGGER users_search_update AFTER UPDATE OF search_key ON users BEGIN
    INSERT INTO users_search(users_search, rowid, search_key) VALUES ('delete', old.seq, old.search_key);
    INSERT INTO users_search(rowid, search_key) VALUES (new.seq, new.search_key);
  END`.execute(db);
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  const search = dialect === 'sqlite' ? ['users_search'] : [];
  for (const table of ['credentials', 'room_members', 'rooms', ...search, 'users', 'organizations']) {
    await db.schema.dropTable(table).execute();
  }
}
