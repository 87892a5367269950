import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { loadConfig } from '../../../src/config.ts';
import { migrateToLatest, openDatabase } from '../../../src/db/database.ts';
import { migrationsFor } from '../../../src/db/migrations/index.ts';
import { validateDirectoryFile } from '../../../src/domain/directory-file.ts';
import { importDirectory } from '../../../src/directory/bulk-import.ts';
import { freshDatabase } from '../../helpers/databases.ts';
import { DIRECTORY } from '../../helpers/fixtures.ts';
import { freshDataDir } from '../../helpers/test-app.ts';

/*
 * PostgreSQL's sort indexes come to carry seq, so a sort order is read from
 * the index alone: stored users keep their order, and the migration can be undone.
 */
describe('the sort-indexes-cover-seq migration (PostgreSQL)', () => {
  it('rebuilds the three sort indexes with seq, which then answer from the index alone, and undoes it', async () => {
    const database = await freshDatabase('postgres');
    const dataDir = freshDataDir();
    const handle = openDatabase(loadConfig({ SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'silent', ...database.env }));
    try {
      const migrator = new Migrator({ db: handle.db, provider: { getMigrations: async () => migrationsFor('postgres') } });
      const downTo = async (name: string) => {
        const result = await migrator.migrateTo(name);
        if (result.error !== undefined) throw result.error;
      };
      // Imported by today's code, at today's schema; then taken back to before the migration.
      await migrateToLatest(handle);
      await importDirectory(handle.db, validateDirectoryFile(DIRECTORY).file);
      await downTo('2026-11-23T0700-search-index-without-positions');
      const definitions = async () =>
        (
          await sql<{
            definition: string;
          }>`select indexdef as definition from pg_indexes where tablename = 'users' and indexname like 'users_by_%' order by indexname`.execute(handle.db)
        ).rows.map((row) => row.definition);
      const byLastname = async () =>
        (await sql<{ seq: number }>`select seq from users order by org_id, lastname_key, firstname_key, email_key, id`.execute(handle.db)).rows.map(
          (row) => row.seq,
        );
      const before = await byLastname();
      assert.ok(before.length > 0);
      assert.ok((await definitions()).every((definition) => !definition.includes('INCLUDE')));

      await migrateToLatest(handle);
      const covering = await definitions();
      assert.equal(covering.length, 3);
      assert.ok(
        covering.every((definition) => definition.endsWith('INCLUDE (seq)')),
        covering.join('\n'),
      );
      assert.deepEqual(await byLastname(), before);
      await sql`vacuum users`.execute(handle.db);
      await sql`set enable_seqscan = off`.execute(handle.db);
      const plan = (
        await sql<{ 'QUERY PLAN': string }>`explain select seq from users where org_id = 'acme' order by lastname_key, firstname_key, email_key, id`.execute(
          handle.db,
        )
      ).rows
        .map((row) => row['QUERY PLAN'])
        .join('\n');
      assert.match(plan, /Index Only Scan using users_by_lastname/);

      await downTo('2026-11-23T0700-search-index-without-positions');
      assert.ok((await definitions()).every((definition) => !definition.includes('INCLUDE')));
      assert.deepEqual(await byLastname(), before);
    } finally {
      await handle.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
