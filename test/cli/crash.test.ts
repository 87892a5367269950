import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import { SQLITE_FILE } from '../../src/db/database.ts';
import { freePort, runCli, startServer } from '../helpers/cli.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { makePdf } from '../helpers/pdf.ts';
import { basic, freshDataDir } from '../helpers/test-app.ts';

/*
 * kill -9 the server in the middle of a stream of concurrent uploads, start it
 * again: every upload that got a 201 is there with identical bytes, every stored
 * document is complete, and no temporary file or orphan blob is left.
 */
describe('a crash during uploads', () => {
  let dataDir: string;
  before(async () => {
    dataDir = freshDataDir();
    const file = path.join(dataDir, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    assert.equal((await runCli(['import', file], { SIGNROOM_DATA_DIR: dataDir })).code, 0);
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('loses no acknowledged upload and leaves nothing half-written', async () => {
    const env = { SIGNROOM_DATA_DIR: dataDir, PORT: String(await freePort()), SIGNROOM_LOG_LEVEL: 'warn' };
    const server = await startServer(env);
    const url = `${server.url}/admin/api/v3/organizations/acme/rooms/board/documents`;
    const headers = { authorization: basic('acme-admin', ACME_PASSWORD), 'content-type': 'application/json' };
    const acknowledged = new Map<string, Buffer>();
    let counter = 0;
    let stopped = false;
    const uploader = async () => {
      while (!stopped) {
        // Distinct bytes each time, some large enough that writing them takes a moment.
        const n = counter++;
        const pdf = makePdf([{ width: 200 + n, height: 300, content: `% ${'x'.repeat((n % 5) * 200_000)}` }]);
        try {
          const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ payload: pdf.toString('base64') }) });
          if (response.status === 201) acknowledged.set(((await response.json()) as { id: string }).id, pdf);
        } catch {
          return; // the server is gone
        }
      }
    };
    const uploads = Array.from({ length: 6 }, uploader);
    while (acknowledged.size < 8) await new Promise((resolve) => setTimeout(resolve, 20));
    server.child.kill('SIGKILL');
    await once(server.child, 'exit');
    stopped = true;
    await Promise.all(uploads);

    const restarted = await startServer(env);
    try {
      for (const [id, bytes] of acknowledged) {
        const response = await fetch(`${url}/${id}/content`, { headers });
        assert.equal(response.status, 200, `acknowledged document ${id}`);
        assert.deepEqual(Buffer.from(await response.arrayBuffer()), bytes);
      }
      const db = new DatabaseSync(path.join(dataDir, SQLITE_FILE), { readOnly: true });
      const rows = db.prepare('SELECT id, sha256, size_bytes FROM documents').all() as { id: string; sha256: string; size_bytes: number }[];
      db.close();
      const blobs = path.join(dataDir, 'blobs');
      for (const row of rows) {
        const bytes = readFileSync(path.join(blobs, row.sha256.slice(0, 2), row.sha256));
        assert.equal(createHash('sha256').update(bytes).digest('hex'), row.sha256, `blob of ${row.id} is complete`);
        assert.equal(bytes.length, row.size_bytes);
      }
      const stored = readdirSync(blobs).filter((name) => /^[0-9a-f]{2}$/.test(name)).flatMap((shard) => readdirSync(path.join(blobs, shard)));
      assert.deepEqual(stored.sort(), [...new Set(rows.map((row) => row.sha256))].sort(), 'no orphan blobs');
      assert.deepEqual(readdirSync(path.join(blobs, 'tmp')), [], 'no temporary files');
      assert.ok(rows.length >= acknowledged.size);
    } finally {
      restarted.child.kill('SIGTERM');
      await once(restarted.child, 'exit');
    }
  });
});
