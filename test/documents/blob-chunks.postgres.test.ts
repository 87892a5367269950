import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { buildApp } from '../../src/app.ts';
import { migrateToLatest } from '../../src/db/database.ts';
import { migrationsFor } from '../../src/db/migrations/index.ts';
import { BLOB_CHUNK_BYTES, PostgresBlobStore } from '../../src/documents/blob-store.ts';
import { freshDatabase } from '../helpers/databases.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { rawPdf } from '../helpers/pdf.ts';
import { basic, freshDataDir, startTestApp, type TestApp } from '../helpers/test-app.ts';

const DOCS = '/admin/api/v3/organizations/acme/rooms/board/documents';
const auth = basic('acme-admin', ACME_PASSWORD);
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** A one-page PDF of exactly `size` bytes, nearly all of them random (an unused stream), so no two are alike. */
function pdfOfSize(size: number): Buffer {
  let filler = size - 300;
  for (;;) {
    const bytes = randomBytes(filler).toString('latin1');
    const pdf = rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 300] >>',
      `<< /Length ${bytes.length} >>\nstream\n${bytes}\nendstream`,
    ]);
    if (pdf.length === size) return pdf;
    filler += size - pdf.length;
  }
}

interface ChunkRow {
  seq: number;
  length: number;
}

/**
 * PostgreSQL keeps a blob as one row of `blobs` and its bytes in rows of
 * `blob_chunks`; these tests look at those rows directly, on a real server.
 */
describe('document bytes in PostgreSQL chunks', () => {
  let t: TestApp;
  const upload = (bytes: Buffer) =>
    t.app.inject({
      method: 'POST',
      url: DOCS,
      headers: { authorization: auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: bytes.toString('base64') }),
    });
  const content = (id: string) => t.app.inject({ url: `${DOCS}/${id}/content`, headers: { authorization: auth } });
  const remove = (id: string) => t.app.inject({ method: 'DELETE', url: `${DOCS}/${id}`, headers: { authorization: auth } });
  const chunks = async (hash: string) =>
    (await t.sql<ChunkRow>(sql`SELECT seq, length(bytes) AS length FROM blob_chunks WHERE sha256 = ${hash} ORDER BY seq`)).map((row) => ({
      seq: Number(row.seq),
      length: Number(row.length),
    }));
  const blobRows = (hash: string) => t.sql<{ size_bytes: string }>(sql`SELECT size_bytes FROM blobs WHERE sha256 = ${hash}`);
  /** The chunk lengths a blob of `size` bytes is stored as. */
  const expectedChunks = (size: number): ChunkRow[] =>
    Array.from({ length: Math.ceil(size / BLOB_CHUNK_BYTES) }, (_, seq) => ({ seq, length: Math.min(BLOB_CHUNK_BYTES, size - seq * BLOB_CHUNK_BYTES) }));

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(() => t.close());

  it('stores a document of many chunks in order and serves it byte for byte', async () => {
    for (const size of [5 * BLOB_CHUNK_BYTES + 1234, 3 * BLOB_CHUNK_BYTES, 2_000]) {
      const pdf = pdfOfSize(size);
      const created = await upload(pdf);
      assert.equal(created.statusCode, 201, created.body);
      const served = await content(created.json().id);
      assert.equal(served.statusCode, 200);
      assert.equal(served.rawPayload.length, size);
      assert.ok(served.rawPayload.equals(pdf), `${size} bytes read back unchanged`);
      assert.deepEqual(await chunks(sha256(pdf)), expectedChunks(size), `${size} bytes: chunks 0…n-1, all full but the last`);
      assert.deepEqual(await blobRows(sha256(pdf)), [{ size_bytes: String(size) }]);
      const [stored] = await t.sql<{ actual: string }>(
        sql`SELECT encode(sha256(string_agg(bytes, ''::bytea ORDER BY seq)), 'hex') AS actual FROM blob_chunks WHERE sha256 = ${sha256(pdf)}`,
      );
      assert.equal(stored?.actual, sha256(pdf), 'the chunks in order are the bytes their key names');
    }
  });

  it('stores identical bytes once, and deletes the chunks with the last document that uses them', async () => {
    const pdf = pdfOfSize(4 * BLOB_CHUNK_BYTES + 7);
    const hash = sha256(pdf);
    const first = (await upload(pdf)).json().id;
    const second = (await upload(pdf)).json().id;
    assert.notEqual(first, second);
    assert.equal((await blobRows(hash)).length, 1);
    assert.deepEqual(await chunks(hash), expectedChunks(pdf.length), 'one set of chunks for both documents');

    assert.equal((await remove(first)).statusCode, 204);
    assert.deepEqual(await chunks(hash), expectedChunks(pdf.length), 'kept for the other document');
    assert.ok((await content(second)).rawPayload.equals(pdf));

    assert.equal((await remove(second)).statusCode, 204);
    assert.deepEqual(await blobRows(hash), []);
    assert.deepEqual(await chunks(hash), [], 'no chunk outlives its blob');
  });

  it('refuses to serve a blob with a missing chunk instead of serving it short', async () => {
    const pdf = pdfOfSize(3 * BLOB_CHUNK_BYTES + 99);
    const id = (await upload(pdf)).json().id;
    await t.sql(sql`DELETE FROM blob_chunks WHERE sha256 = ${sha256(pdf)} AND seq = 1`);
    const served = await content(id);
    assert.equal(served.statusCode, 500);
    assert.equal(served.json().code, 'internal-error');
  });
});

describe('orphan chunks at start', () => {
  it('removes an orphan blob with its chunks, but not one whose document another instance is committing', async () => {
    const t = await startTestApp();
    try {
      await t.importDirectory(DIRECTORY);
      await t.app.close();
      const orphan = 'e'.repeat(64);
      const adopted = 'd'.repeat(64);
      await t.plantOrphanBlob(orphan);
      await t.plantOrphanBlob(adopted);

      // Another instance uploads the bytes of `adopted` right now: it holds the
      // blob's lock and has inserted its document, not yet committed.
      const other = new pg.Client({ connectionString: t.config.databaseUrl });
      await other.connect();
      let starting: ReturnType<typeof buildApp> | undefined;
      try {
        await other.query('BEGIN');
        await other.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`blob:${adopted}`]);
        await other.query(
          `INSERT INTO documents (id, org_id, room_id, name, media_type, size_bytes, sha256, page_count, created_at, uploaded_by, thumbnail, thumbnail_rendered)
           VALUES ($1, 'acme', 'board', NULL, 'application/pdf', 196608, $2, 1, $3, 'acme-admin', $4, 0)`,
          [randomUUID(), adopted, new Date().toISOString(), Buffer.from('png')],
        );
        starting = buildApp(t.config);
        // Recovery waits for that lock before it checks the blob again.
        for (let i = 0; ; i++) {
          const waiting = await other.query(
            `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          );
          if (waiting.rowCount! > 0) break;
          assert.ok(i < 200, 'recovery never waited for the blob lock');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        await other.query('COMMIT');
      } finally {
        await other.end();
        // Closed whatever happened above, or its pool and render workers would keep the test running.
        if (starting !== undefined) await (await starting).close();
      }

      assert.deepEqual(await t.storedBlobs(), [adopted], 'the orphan went, the adopted blob stayed');
      const left = await t.sql<{ sha256: string; n: string }>(sql`SELECT sha256, count(*) AS n FROM blob_chunks GROUP BY sha256`);
      assert.deepEqual(left, [{ sha256: adopted, n: '3' }], "the orphan's chunks went with it");
    } finally {
      await t.close();
    }
  });
});

describe('the blob-chunks migration', () => {
  it('splits blobs stored whole into chunks that read back the same, and joins them again when undone', async () => {
    const database = await freshDatabase('postgres');
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.env['DATABASE_URL'], max: 2 }) }) });
    try {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrationsFor('postgres') } });
      const upTo = async (name: string) => {
        const result = await migrator.migrateTo(name);
        if (result.error !== undefined) throw result.error;
      };
      await upTo('2026-11-22T0200-shared-state');
      const blobs = [randomBytes(3 * 65536 + 3392), randomBytes(2 * 65536), Buffer.alloc(0), randomBytes(10)];
      for (const bytes of blobs) await sql`INSERT INTO blobs (sha256, bytes) VALUES (${sha256(bytes)}, ${bytes})`.execute(db);

      await migrateToLatest({ db, dialect: 'postgres' });
      const store = new PostgresBlobStore(db, freshDataDir());
      for (const bytes of blobs) {
        const read = await store.get(sha256(bytes));
        assert.ok(read !== undefined && read.equals(bytes), `${bytes.length} bytes read back unchanged`);
      }
      const counts = await sql<{ sha256: string; n: string }>`SELECT sha256, count(*) AS n FROM blob_chunks GROUP BY sha256`.execute(db);
      assert.deepEqual(
        Object.fromEntries(counts.rows.map((row) => [row.sha256, Number(row.n)])),
        Object.fromEntries(blobs.map((bytes) => [sha256(bytes), Math.max(1, Math.ceil(bytes.length / 65536))])),
      );

      await upTo('2026-11-22T0200-shared-state');
      const restored = await sql<{ sha256: string; bytes: Buffer }>`SELECT sha256, bytes FROM blobs`.execute(db);
      assert.equal(restored.rows.length, blobs.length);
      for (const row of restored.rows) assert.equal(sha256(Buffer.from(row.bytes)), row.sha256, 'whole again');
    } finally {
      await db.destroy();
      await database.drop();
    }
  });
});
