import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  const text = dialect === 'postgres' ? sql`text collate "C"` : 'text';
  const bytes = dialect === 'postgres' ? 'bytea' : 'blob';

  await db.schema
    .createTable('documents')
    .addColumn('id', text, (c) => c.primaryKey())
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('name', text)
    .addColumn('media_type', text, (c) => c.notNull())
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('sha256', text, (c) => c.notNull())
    .addColumn('page_count', 'integer', (c) => c.notNull())
    .addColumn('created_at', text, (c) => c.notNull())
    .addColumn('uploaded_by', text, (c) => c.notNull())
    .addColumn('thumbnail', bytes, (c) => c.notNull())
    .addColumn('thumbnail_rendered', 'integer', (c) => c.notNull())
    .addForeignKeyConstraint('documents_room_fk', ['org_id', 'room_id'], 'rooms', ['org_id', 'id'])
    .execute();
  await db.schema.createIndex('documents_by_room').on('documents').columns(['org_id', 'room_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('documents_by_sha256').on('documents').column('sha256').execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('username', text, (c) => c.notNull())
    .addColumn('key', text, (c) => c.notNull())
    .addColumn('request_sha256', text, (c) => c.notNull())
    // The first answer is kept whole (id and thumbnail), so a retry gets it even after a delete.
    .addColumn('document_id', text, (c) => c.notNull())
    .addColumn('thumbnail', bytes, (c) => c.notNull())
    .addColumn('created_at', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['org_id', 'room_id', 'username', 'key'])
    .execute();
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
  await db.schema.dropTable('documents').execute();
}
