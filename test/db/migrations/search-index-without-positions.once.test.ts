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
import { DIRECTORY } from '../../helpers/fixtures.ts';
import { freshDataDir } from '../../helpers/test-app.ts';

/*
 * SQLite's trigram index moves to detail=none: an existing database keeps
 * finding its users through it, with terms looked up as trigrams, and the
 * migration can be undone.
 */
describe('the search-index-without-positions migration (SQLite)', () => {
  it('rebuilds the index of stored users, and undoes it', async () => {
    const dataDir = freshDataDir();
    const handle = openDatabase(loadConfig({ SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'silent' }));
    try {
      const migrator = new Migrator({ db: handle.db, provider: { getMigrations: async () => migrationsFor('sqlite') } });
      const upTo = async (name: string) => {
        const result = await migrator.migrateTo(name);
        if (result.error !== undefined) throw result.error;
      };
      // Imported by today's code, at today's schema; then taken back to before the migration.
      await migrateToLatest(handle);
      await importDirectory(handle.db, validateDirectoryFile(DIRECTORY).file);
      await upTo('2026-11-23T0600-change-notices');
      const definition = async () => (await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE name = 'users_search'`.execute(handle.db)).rows[0]!.sql;
      const phrase = async (query: string) =>
        (
          await sql<{
            id: string;
          }>`SELECT u.id FROM users u WHERE u.seq IN (SELECT rowid FROM users_search WHERE users_search MATCH ${query}) ORDER BY u.id`.execute(handle.db)
        ).rows.map((row) => row.id);
      const before = await phrase('"anna@"');
      assert.ok(before.length > 0);

      await migrateToLatest(handle);
      assert.match(await definition(), /detail=none/);
      assert.deepEqual(await phrase('"ann" AND "nna" AND "na@"'), before, 'every stored user is in the rebuilt index');
      await assert.rejects(phrase('"anna@"'), /phrase queries are not supported/);

      await upTo('2026-11-23T0600-change-notices');
      assert.doesNotMatch(await definition(), /detail=none/);
      assert.deepEqual(await phrase('"anna@"'), before);
    } finally {
      await handle.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
