import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { validateDirectoryFile } from '../../src/domain/directory-file.ts';
import { migrateToLatest, openDatabase } from '../../src/db/database.ts';
import { importDirectory } from '../../src/directory/bulk-import.ts';
import { LISTED_STATES } from '../../src/repositories/directory-write-repository.ts';
import { importOptionsFor } from '../../src/search-index/import-copies.ts';
import { readLoadJob } from '../../src/search-index/loader.ts';
import { readSnapshot, snapshotState, writeSnapshot } from '../../src/search-index/snapshots.ts';
import { MAX_LAID_OVER } from '../../src/search-index/search-indexes.ts';
import { basic, LOOKUP, startTestApp, type TestApp } from '../helpers/test-app.ts';

const AUTH = basic('root', 'root-password');

/** The organization's users: u0…u39, each with a lastname of its own. */
const users = Array.from({ length: 40 }, (_, k) => ({ id: `u${k}`, firstname: 'Ann', lastname: `Lastname${k}x`, email: `u${k}@acme.example` }));

/** Asks a lookup with terms (which queues the index), waits until the index is held, and returns the emails the lookup answers then. */
async function lookupOnceIndexed(app: FastifyInstance, term: string, orgId = 'acme'): Promise<string[]> {
  const ask = async (query = term) => {
    const response = await app.inject({ url: `${LOOKUP(orgId, 'room')}?searchQuery=${query}`, headers: { authorization: AUTH } });
    assert.equal(response.statusCode, 200, response.body);
    return response.json<{ content: { email: string }[] }>().content.map((user) => user.email);
  };
  // Another term, so the answer to this one is not cached from the database's.
  await ask('queues-the-index');
  for (;;) {
    const status = (await app.inject('/readyz')).json().searchIndexes as { organizations: number; loading: number };
    if (status.organizations === 1 && status.loading === 0) return ask();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A server keeps a copy of each index it reads on disk, and a restarted one
 * takes the index from it while the database lists the state it was read at.
 * What answers is seen by changing a user's search key behind the import's
 * back (no version is made): the database then answers otherwise than the copy.
 */
describe('copies of the search indexes on disk', () => {
  let t: TestApp;
  const copy = () => path.join(t.dataDir, 'search-indexes', 'org-acme.index');
  const restarted = async (work: (app: FastifyInstance) => Promise<void>) => {
    const app = await buildApp(t.config);
    try {
      await work(app);
    } finally {
      await app.close();
    }
  };

  before(async () => {
    t = await startTestApp({ SIGNROOM_SEARCH_MIN_USERS: '0' });
    await t.importDirectory({
      organizations: [{ id: 'acme', name: 'Acme', users, rooms: [{ id: 'room', members: [] }] }],
      credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
    });
  });
  after(() => t.close());

  it('keeps a copy of the index it reads', async () => {
    assert.deepEqual(await lookupOnceIndexed(t.app, 'lastname7x'), ['u7@acme.example']);
    assert.ok(existsSync(copy()));
  });

  it('after a restart, answers from the copy while the database lists the state it was read at', async () => {
    await t.sql(sql`UPDATE users SET search_key = 'changed behind the import' WHERE id = 'u8'`);
    await restarted(async (app) => {
      await app.ready();
      // The members of its largest rooms are read after it, in a loading process, which /readyz may still count.
      assert.equal((await app.inject('/readyz')).json().searchIndexes.organizations, 1, 'held before the server is ready to listen');
      assert.deepEqual(await lookupOnceIndexed(app, 'lastname8x'), ['u8@acme.example'], 'the copy still holds the key the import wrote');
    });
  });

  it('after a restart that follows an import, answers from the copy with what the import changed laid over it', async () => {
    await t.importDirectory({ organizations: [{ id: 'acme', name: 'Acme', users: [{ ...users[7]!, lastname: 'Renamed' }] }] });
    await restarted(async (app) => {
      assert.deepEqual(await lookupOnceIndexed(app, 'renamed'), ['u7@acme.example']);
      assert.deepEqual(await lookupOnceIndexed(app, 'lastname7x'), []);
      assert.deepEqual(await lookupOnceIndexed(app, 'lastname8x'), ['u8@acme.example'], 'from the copy');
    });
  });

  it("a loader does not write its copy over one of a later state the database lists (an import's, left meanwhile)", async () => {
    const directory = t.config.searchCopiesDir;
    const [organization] = await t.sql<{ version: number | string }>(sql`SELECT directory_version AS version FROM organizations WHERE id = 'acme'`);
    const current = Number(organization!.version);
    const parts = (await readSnapshot(directory, 'acme', async () => true))!;
    await writeSnapshot(directory, 'acme', { version: current + 5, stamp: 'later' }, parts);
    await t.sql(sql`INSERT INTO directory_states (org_id, version, stamp) VALUES ('acme', ${current + 5}, 'later')`);
    const load = async () => {
      const handle = openDatabase(t.config);
      try {
        return await readLoadJob(handle.db, { kind: 'organization', orgId: 'acme', minUsers: 0, maxUsers: 1_000_000 }, { snapshots: directory });
      } finally {
        await handle.close();
      }
    };
    assert.equal((await load()).kind, 'index');
    assert.equal((await snapshotState(directory, 'acme'))?.version, current + 5, 'kept');
    // Not listed (an import that did not commit): written over.
    await t.sql(sql`DELETE FROM directory_states WHERE org_id = 'acme' AND version = ${current + 5}`);
    await load();
    assert.equal((await snapshotState(directory, 'acme'))?.version, current);
  });

  it("reads the index from the database when the database does not list the copy's state (another database, or a restored one)", async () => {
    await t.sql(sql`DELETE FROM directory_states`);
    await restarted(async (app) => {
      assert.deepEqual(await lookupOnceIndexed(app, 'lastname8x'), [], 'the database holds the changed key');
      assert.deepEqual(await lookupOnceIndexed(app, 'renamed'), ['u7@acme.example']);
    });
  });

  it('lists only the last versions of each organization', async () => {
    for (let k = 0; k < LISTED_STATES + 4; k++) await t.importDirectory({ organizations: [{ id: 'tiny', name: `Tiny ${k}` }] });
    const rows = await t.sql<{ version: number | string }>(sql`SELECT version FROM directory_states WHERE org_id = 'tiny' ORDER BY version`);
    const [organization] = await t.sql<{ version: number | string }>(sql`SELECT directory_version AS version FROM organizations WHERE id = 'tiny'`);
    const current = Number(organization!.version);
    assert.deepEqual(
      rows.map((row) => Number(row.version)),
      Array.from({ length: LISTED_STATES }, (_, k) => current - LISTED_STATES + 1 + k),
    );
  });

  it('lists each single change of the API too, and only the last versions', async () => {
    const [before] = await t.sql<{ version: number | string }>(sql`SELECT directory_version AS version FROM organizations WHERE id = 'tiny'`);
    for (let k = 0; k < LISTED_STATES + 3; k++) {
      const response = await t.app.inject({
        method: 'PATCH',
        url: '/admin/api/v3/organizations/tiny',
        headers: { authorization: AUTH, 'content-type': 'application/merge-patch+json' },
        payload: { name: `Tiny renamed ${k}` },
      });
      assert.equal(response.statusCode, 200, response.body);
    }
    const rows = await t.sql<{ version: number | string }>(sql`SELECT version FROM directory_states WHERE org_id = 'tiny' ORDER BY version`);
    const current = Number(before!.version) + LISTED_STATES + 3;
    assert.deepEqual(
      rows.map((row) => Number(row.version)),
      Array.from({ length: LISTED_STATES }, (_, k) => current - LISTED_STATES + 1 + k),
    );
  });
});

/**
 * An import that changes more users than a server lays over its index leaves a
 * copy of the index, and a server takes the index from that copy rather than
 * reading it whole. What answers is seen by changing a user's search key in the
 * import's own transaction, after the copy is written: the database then
 * answers otherwise than the copy.
 */
describe('copies of the search indexes left by large imports', () => {
  let t: TestApp;
  const many = MAX_LAID_OVER + 1;
  const bigUsers = (suffix: string) =>
    Array.from({ length: many }, (_, k) => ({ id: `b${k}`, firstname: 'Bo', lastname: `Name${k}${suffix}`, email: `b${k}@big.example` }));
  const copy = () => path.join(t.dataDir, 'search-indexes', 'org-big.index');
  /** Imports as the CLI does, with user b1's search key changed to `tampered` just before the commit. */
  const importTampered = async (users: object[], tampered: string) => {
    const handle = openDatabase(t.config);
    try {
      await migrateToLatest(handle);
      const { beforeCommit } = importOptionsFor(t.config);
      const file = validateDirectoryFile({
        organizations: [{ id: 'big', name: 'Big', users, rooms: [{ id: 'room', members: [] }] }],
        credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
      });
      await importDirectory(handle.db, file.file, file.problems, {
        beforeCommit: async (trx, imported, stamp) => {
          await beforeCommit!(trx, imported, stamp);
          await sql`UPDATE users SET search_key = ${tampered} WHERE org_id = 'big' AND id = 'b1'`.execute(trx);
        },
      });
    } finally {
      await handle.close();
    }
  };

  before(async () => {
    t = await startTestApp({ SIGNROOM_SEARCH_MIN_USERS: '0' });
  });
  after(() => t.close());

  it('a first import of a large organization leaves no copy: the server reads the index whole, and keeps one', async () => {
    await t.importDirectory({
      organizations: [{ id: 'big', name: 'Big', users: bigUsers('x'), rooms: [{ id: 'room', members: [] }] }],
      credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
    });
    assert.equal(existsSync(copy()), false);
    assert.deepEqual(await lookupOnceIndexed(t.app, 'name1x', 'big'), ['b1@big.example']);
    assert.ok(existsSync(copy()), 'written by the loading process');
  });

  it('an import changing more users than are laid over leaves a copy, which the running server takes', async () => {
    // The server holds the index of the first import (above); this one renames every user.
    await importTampered(bigUsers('y'), 'tampered again');
    assert.deepEqual(await lookupOnceIndexed(t.app, 'name1y', 'big'), ['b1@big.example'], 'from the new copy');
    assert.deepEqual(await lookupOnceIndexed(t.app, 'name2x', 'big'), [], 'not the index held before');
  });

  it('an import whose copy cannot be read still commits, and says so', async () => {
    const before = statSync(copy()).mtimeMs;
    const warnings: string[] = [];
    const handle = openDatabase(t.config);
    try {
      const { beforeCommit } = importOptionsFor(t.config, (message) => warnings.push(message));
      const file = validateDirectoryFile({ organizations: [{ id: 'big', name: 'Big', users: bigUsers('w') }] });
      await importDirectory(handle.db, file.file, file.problems, {
        // A statement of the copy's read fails: on PostgreSQL that aborts the transaction, unless undone.
        beforeCommit: async (trx, imported, stamp) => {
          await sql`ALTER TABLE users RENAME COLUMN changed_in TO changed_in_hidden`.execute(trx);
          await beforeCommit!(trx, imported, stamp);
          await sql`ALTER TABLE users RENAME COLUMN changed_in_hidden TO changed_in`.execute(trx);
        },
      });
    } finally {
      await handle.close();
    }
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^left no copy of the search index of organization "big" \(.+\); servers holding it will read it whole$/);
    assert.equal(statSync(copy()).mtimeMs, before, 'no copy written');
    const [row] = await t.sql<{ lastname: string }>(sql`SELECT lastname FROM users WHERE org_id = 'big' AND id = 'b1'`);
    assert.equal(row!.lastname, 'Name1w', 'the import committed');
    assert.deepEqual(await lookupOnceIndexed(t.app, 'name1w', 'big'), ['b1@big.example']);
  });

  it('an import changing fewer users leaves the copy as it was', async () => {
    const before = statSync(copy()).mtimeMs;
    await t.importDirectory({ organizations: [{ id: 'big', name: 'Big', users: bigUsers('z').slice(0, 10) }] });
    assert.equal(statSync(copy()).mtimeMs, before);
    assert.deepEqual(await lookupOnceIndexed(t.app, 'name1z', 'big'), ['b1@big.example'], 'laid over the index held');
  });
});
