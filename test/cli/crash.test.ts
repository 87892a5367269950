import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { cliWorkspace, freePort, runCli, startServer, type CliWorkspace } from '../helpers/cli.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { makePdf } from '../helpers/pdf.ts';
import { basic } from '../helpers/test-app.ts';

/** Every stored blob: its key, the SHA-256 of its bytes and its size. */
async function storedBlobs(workspace: CliWorkspace): Promise<{ key: string; actual: string; size: number }[]> {
  if (TEST_DIALECT === 'postgres') {
    // A blob's bytes are its chunks in order; one recorded size that disagrees with them is a damaged blob too.
    const rows = await workspace.sql<{ key: string; actual: string; size: number; recorded: number }>(
      sql`SELECT b.sha256 AS key, encode(sha256(coalesce(string_agg(c.bytes, ''::bytea ORDER BY c.seq), ''::bytea)), 'hex') AS actual,
            coalesce(sum(length(c.bytes)), 0) AS size, b.size_bytes AS recorded
          FROM blobs b LEFT JOIN blob_chunks c ON c.sha256 = b.sha256 GROUP BY b.sha256, b.size_bytes`,
    );
    return rows.map((row) => {
      assert.equal(Number(row.recorded), Number(row.size), `blob ${row.key}: recorded size against its chunks`);
      return { key: row.key, actual: row.actual, size: Number(row.size) };
    });
  }
  const blobs = path.join(workspace.dataDir, 'blobs');
  const shards = readdirSync(blobs).filter((name) => /^[0-9a-f]{2}$/.test(name));
  return shards.flatMap((shard) =>
    readdirSync(path.join(blobs, shard)).map((key) => {
      const bytes = readFileSync(path.join(blobs, shard, key));
      return { key, actual: createHash('sha256').update(bytes).digest('hex'), size: bytes.length };
    }),
  );
}

/*
 * kill -9 the server in the middle of a stream of concurrent uploads, start it
 * again: every upload that got a 201 is there with identical bytes, every stored
 * document is complete, and no temporary file or orphan blob is left.
 */
describe('a crash during uploads', () => {
  let workspace: CliWorkspace;
  before(async () => {
    workspace = await cliWorkspace();
    const file = path.join(workspace.dataDir, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    assert.equal((await runCli(['import', file], workspace.env)).code, 0);
  });
  after(() => workspace.close());

  it('loses no acknowledged upload and leaves nothing half-written', async () => {
    const env = { ...workspace.env, PORT: String(await freePort()), SIGNROOM_LOG_LEVEL: 'warn' };
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
      const rows = await workspace.sql<{ id: string; sha256: string; size_bytes: number }>(sql`SELECT id, sha256, size_bytes FROM documents`);
      const stored = await storedBlobs(workspace);
      for (const blob of stored) assert.equal(blob.actual, blob.key, `blob ${blob.key} is complete`);
      const blobs = new Map(stored.map((blob) => [blob.key, blob]));
      for (const row of rows) {
        const blob = blobs.get(row.sha256);
        assert.ok(blob !== undefined, `blob of ${row.id} is stored`);
        assert.equal(blob.size, Number(row.size_bytes));
      }
      assert.deepEqual([...blobs.keys()].sort(), [...new Set(rows.map((row) => row.sha256))].sort(), 'no orphan blobs');
      assert.deepEqual(readdirSync(path.join(workspace.dataDir, 'blobs', 'tmp')), [], 'no temporary files');
      assert.ok(rows.length >= acknowledged.size);
    } finally {
      restarted.child.kill('SIGTERM');
      await once(restarted.child, 'exit');
    }
  });
});
