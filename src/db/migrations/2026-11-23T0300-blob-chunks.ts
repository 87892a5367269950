import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/** Bytes per chunk, as this migration splits the blobs it finds (the blob store's size then; it reads any). */
const CHUNK_BYTES = 64 * 1024;

/**
 * PostgreSQL keeps a blob's bytes in chunks of 64 KiB (`blob_chunks`) instead
 * of one bytea value: node-pg copies a parameter whole into its send buffer and
 * receives a bytea as hex text, so one large value cost several times its size
 * in the server's memory each way. `blobs` keeps one row per blob (its size), which
 * the chunks hang off: deleting it deletes them. SQLite keeps files: no change.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await db.schema
    .createTable('blob_chunks')
    .addColumn('sha256', sql`text collate "C"`, (c) => c.notNull().references('blobs.sha256').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('bytes', 'bytea', (c) => c.notNull())
    .addPrimaryKeyConstraint('blob_chunks_pk', ['sha256', 'seq'])
    .execute();
  // Documents are compressed already (PDF streams, PNG, JPEG): do not try again.
  await sql`ALTER TABLE blob_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL`.execute(db);
  await db.schema.alterTable('blobs').addColumn('size_bytes', 'bigint').execute();
  // Blobs stored before: split into chunks (an empty blob gets one empty chunk).
  await sql`
    INSERT INTO blob_chunks (sha256, seq, bytes)
    SELECT b.sha256, c.seq, substring(b.bytes FROM c.seq * ${sql.lit(CHUNK_BYTES)} + 1 FOR ${sql.lit(CHUNK_BYTES)})
    FROM blobs b CROSS JOIN LATERAL generate_series(0, greatest(length(b.bytes) - 1, 0) / ${sql.lit(CHUNK_BYTES)}) AS c(seq)`.execute(db);
  // Emptied before the column is dropped, which alone would leave the old values taking space.
  await sql`UPDATE blobs SET size_bytes = length(bytes), bytes = ''::bytea`.execute(db);
  await db.schema
    .alterTable('blobs')
    .alterColumn('size_bytes', (c) => c.setNotNull())
    .execute();
  await db.schema.alterTable('blobs').dropColumn('bytes').execute();
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await db.schema.alterTable('blobs').addColumn('bytes', 'bytea').execute();
  await sql`ALTER TABLE blobs ALTER COLUMN bytes SET STORAGE EXTERNAL`.execute(db);
  await sql`
    UPDATE blobs SET bytes = coalesce(
      (SELECT string_agg(c.bytes, ''::bytea ORDER BY c.seq) FROM blob_chunks c WHERE c.sha256 = blobs.sha256), ''::bytea)`.execute(db);
  await db.schema
    .alterTable('blobs')
    .alterColumn('bytes', (c) => c.setNotNull())
    .execute();
  await db.schema.dropTable('blob_chunks').execute();
  await db.schema.alterTable('blobs').dropColumn('size_bytes').execute();
}
