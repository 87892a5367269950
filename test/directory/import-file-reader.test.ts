import assert from 'node:assert/strict';
import { openSync, writeSync, closeSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrateToLatest, openDatabase } from '../../src/db/database.ts';
import { DirectoryFileChanged } from '../../src/domain/directory-file.ts';
import { openDirectoryFile } from '../../src/directory/import-file-reader.ts';
import { importDirectory } from '../../src/directory/bulk-import.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * The import reads the file twice (validate, then write). A file edited in
 * between must not be imported as something that was never validated: the
 * import fails, nothing is written, and the change is what gets reported.
 */
describe('an import file changed between its two readings', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('is refused, changes nothing, and is known as changed', async () => {
    const file = path.join(t.dataDir, 'changing.json');
    const users = Array.from({ length: 50 }, (_, i) => ({ id: `c${String(i).padStart(2, '0')}`, email: `c${String(i).padStart(2, '0')}@changing.example` }));
    const text = JSON.stringify({ organizations: [{ id: 'changing', name: 'Changing', users }] });
    writeFileSync(file, text);
    const directory = openDirectoryFile(file);
    assert.deepEqual(directory.problems, []);
    // Same length, in place: user c49 now takes c00's email, which the first reading never saw.
    const fd = openSync(file, 'r+');
    const replacement = Buffer.from('c00@changing');
    writeSync(fd, replacement, 0, replacement.length, Buffer.byteLength(text.slice(0, text.indexOf('c49@changing'))));
    closeSync(fd);

    const handle = openDatabase(t.config);
    try {
      await migrateToLatest(handle);
      await assert.rejects(importDirectory(handle.db, directory.file, directory.problems, { assertSourceUnchanged: directory.assertUnchanged }));
      assert.throws(() => directory.assertUnchanged(), DirectoryFileChanged);
      const rows = (await sql<{ n: number | string }>`SELECT count(*) AS n FROM users WHERE org_id = 'changing'`.execute(handle.db)).rows;
      assert.equal(Number(rows[0]!.n), 0);
      const orgs = (await sql<{ n: number | string }>`SELECT count(*) AS n FROM organizations WHERE id = 'changing'`.execute(handle.db)).rows;
      assert.equal(Number(orgs[0]!.n), 0);
    } finally {
      directory.close();
      await handle.close();
    }
  });
});
