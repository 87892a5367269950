import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { ChangeScopedCache, type ChangeSource } from '../../src/lib/change-scoped-cache.ts';

describe('ChangeScopedCache', () => {
  it('keeps values while the database token stays, and empties when it moves', () => {
    let databaseToken = 7;
    const cache = new ChangeScopedCache<string, number>(
      tokenSource(() => databaseToken),
      10,
    );
    cache.set('a', 1, cache.token());
    assert.equal(cache.get('a'), 1);
    databaseToken = 8;
    assert.equal(cache.get('a'), undefined);
  });

  it('refuses a value read before the database moved or before this process forgot something', () => {
    let databaseToken = 1;
    const cache = new ChangeScopedCache<string, number>(
      tokenSource(() => databaseToken),
      10,
    );
    let readAt = cache.token();
    databaseToken = 2; // another connection committed while the read ran
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.delete('b'); // this process wrote meanwhile
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.clear();
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), 1);
  });

  it('reads through: loads once, then serves the kept value; a load overlapping a write of this process is not kept', async () => {
    const cache = new ChangeScopedCache<string, number>(
      tokenSource(() => 1),
      10,
    );
    let loads = 0;
    const load = async () => ++loads;
    assert.equal(await cache.read('a', load), 1);
    assert.equal(await cache.read('a', load), 1);
    assert.equal(loads, 1);
    const written = await cache.forgetting('a', async () => 'written');
    assert.equal(written, 'written');
    assert.equal(await cache.read('a', load), 2);
    // A load still running while this process writes: its (older) value is refused.
    let finishLoad: (value: number) => void = () => undefined;
    const slow = cache.read('b', () => new Promise<number>((resolve) => (finishLoad = resolve)));
    await cache.forgetting('b', async () => undefined);
    finishLoad(10);
    assert.equal(await slow, 10);
    assert.equal(await cache.read('b', async () => 11), 11);
  });

  it('shares one load between concurrent reads of a key in one generation, not across a commit or a write of this process', async () => {
    let databaseToken = 1;
    const cache = new ChangeScopedCache<string, number>(
      tokenSource(() => databaseToken),
      10,
    );
    let loads = 0;
    const finishes: ((value: number) => void)[] = [];
    const load = () => {
      loads += 1;
      return new Promise<number>((resolve) => finishes.push(resolve));
    };
    const first = cache.read('a', load);
    const second = cache.read('a', load);
    assert.equal(loads, 1, "the second read waits for the first one's load");
    databaseToken = 2; // another connection commits: a read asking now must see it
    const afterCommit = cache.read('a', load);
    assert.equal(loads, 2);
    cache.delete('other'); // this process writes
    const afterWrite = cache.read('a', load);
    assert.equal(loads, 3);
    finishes.forEach((finish, k) => finish(10 + k));
    assert.deepEqual(await Promise.all([first, second, afterCommit, afterWrite]), [10, 10, 11, 12]);
    assert.equal(await cache.read('a', load), 12, 'the load of the latest generation is kept');
    assert.equal(loads, 3);

    // A failed load fails every read that shared it, and keeps nothing.
    const failing = () => Promise.reject(new Error('database unreachable'));
    databaseToken = 3;
    const failed = [cache.read('b', failing), cache.read('b', async () => 99)];
    for (const read of failed) await assert.rejects(read, /database unreachable/);
    assert.equal(await cache.read('b', async () => 5), 5);
  });

  it('holds nothing when the database cannot tell whether it changed', () => {
    const cache = new ChangeScopedCache<string, number>(
      tokenSource(() => undefined),
      10,
    );
    cache.set('a', 1, cache.token());
    assert.equal(cache.get('a'), undefined);
  });

  it('gets no SQLite token while a transaction of the connection is open, so nothing pins its snapshot', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-token-'));
    const handle = openDatabase(loadConfig({ SIGNROOM_DATA_DIR: dataDir }));
    try {
      assert.equal(typeof handle.changes.token(), 'number');
      await handle.db.transaction().execute(async (trx) => {
        await sql`create table t (x integer)`.execute(trx);
        assert.equal(handle.changes.token(), undefined);
      });
      assert.equal(typeof handle.changes.token(), 'number');
    } finally {
      await handle.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("shares one SQLite reading between the reads of one request, and sees another connection's commit in the next", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-token-'));
    const config = loadConfig({ SIGNROOM_DATA_DIR: dataDir });
    const server = openDatabase(config);
    const other = openDatabase(config);
    try {
      await sql`create table t (x integer)`.execute(other.db);
      const firstRequest = performance.now();
      const before = server.changes.token(firstRequest);
      await sql`insert into t values (1)`.execute(other.db);
      // A reading taken since the request arrived will do for it; the commit came after that.
      assert.equal(server.changes.token(firstRequest), before);
      const nextRequest = performance.now();
      const afterFirstCommit = server.changes.token(nextRequest);
      assert.notEqual(afterFirstCommit, before, 'a request arriving after the commit sees it');
      await sql`insert into t values (2)`.execute(other.db);
      assert.notEqual(server.changes.token(), afterFirstCommit, 'without a moment, always a fresh reading');
    } finally {
      await other.close();
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

function tokenSource(token: () => number | undefined): ChangeSource {
  const source: ChangeSource = { token, catchUp: () => undefined, about: () => source };
  return source;
}
