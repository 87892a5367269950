import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { removeOrphanedResults } from '../../src/search-index/loader.ts';

describe('removeOrphanedResults', () => {
  it('removes the result files of servers no longer running, and its own it is not waiting for, and nothing else', async () => {
    const directory = await mkdtemp(path.join(tmpdir(), 'signroom-orphans-'));
    try {
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      const names = {
        orphan: `signroom-search-index-${gone}-${randomUUID()}`,
        ownLeftOver: `signroom-search-index-${process.pid}-${randomUUID()}`,
        running: `signroom-search-index-${process.ppid}-${randomUUID()}`,
        other: `signroom-search-index-notes.txt`,
      };
      for (const name of Object.values(names)) await writeFile(path.join(directory, name), 'x');
      assert.equal(await removeOrphanedResults(directory), 2);
      assert.deepEqual((await readdir(directory)).sort(), [names.running, names.other].sort());
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
