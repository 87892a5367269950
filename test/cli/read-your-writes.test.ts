import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort, runCli, startServer } from '../helpers/cli.ts';
import { freshDatabase, TEST_DIALECT, type TestDatabase } from '../helpers/databases.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { basic, freshDataDir, LOOKUP } from '../helpers/test-app.ts';
import { waitUntil } from '../helpers/wait.ts';

const AUTH = { authorization: basic('root', 'root-password') };
const API = '/admin/api/v3/organizations/acme';

/**
 * Read your writes across processes (contract section 8): a write answered 2xx by one server is
 * reflected by every lookup started afterwards on another server of the same database (one SQLite
 * file, or one PostgreSQL database), through the in-memory search indexes too.
 */
describe(`read your writes across two servers on one ${TEST_DIALECT} database`, () => {
  let database: TestDatabase;
  let servers: Awaited<ReturnType<typeof startServer>>[] = [];
  const url = (index: number) => servers[index]!.url;

  const write = async (server: number, method: string, route: string, body?: unknown) => {
    const response = await fetch(`${url(server)}${API}${route}`, {
      method,
      headers: { ...AUTH, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    assert.ok(response.status < 300, `${method} ${route}: ${response.status} ${await response.clone().text()}`);
  };
  const lookup = async (server: number, query: string) => {
    const response = await fetch(`${url(server)}${LOOKUP('acme', 'board')}?${query}`, { headers: AUTH });
    assert.equal(response.status, 200);
    return (await response.json()) as { totalElements: number; content: { email: string; roomMember: boolean }[] };
  };

  before(async () => {
    database = await freshDatabase();
    // SQLite: both servers use one data directory (one database file); PostgreSQL: one each.
    const shared = freshDataDir();
    const file = path.join(shared, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    const imported = await runCli(['import', file], { ...database.env, SIGNROOM_DATA_DIR: shared });
    assert.equal(imported.code, 0, imported.stderr);
    const env = { ...database.env, SIGNROOM_SEARCH_MIN_USERS: '0', SIGNROOM_LOG_LEVEL: 'warn' };
    servers = await Promise.all(
      [0, 1].map(async () => startServer({ ...env, SIGNROOM_DATA_DIR: TEST_DIALECT === 'sqlite' ? shared : freshDataDir(), PORT: String(await freePort()) })),
    );
    // Both hold the organization's index before the writes start (a lookup asks for it; /readyz says when it is held).
    for (const server of [0, 1]) {
      await lookup(server, 'searchQuery=acme');
      await waitUntil(
        `server ${server} to hold the index`,
        async () => {
          const ready = (await (await fetch(`${url(server)}/readyz`)).json()) as { searchIndexes?: { organizations: number; loading: number } };
          return ready.searchIndexes !== undefined && ready.searchIndexes.organizations >= 1 && ready.searchIndexes.loading === 0;
        },
        { everyMs: 50 },
      );
    }
  });
  after(async () => {
    for (const server of servers) {
      server.child.kill('SIGTERM');
      if (server.child.exitCode === null) await once(server.child, 'exit');
    }
    await database.drop();
  });

  it('shows each write on the other server at once: created, renamed, a member, suspended, deleted', async () => {
    for (let round = 0; round < 15; round++) {
      const [writer, reader] = round % 2 === 0 ? [0, 1] : [1, 0];
      const id = `ryw-${round}`;
      const email = `ryw.${round}@acme.example`;
      await write(writer, 'POST', '/users', { id, firstname: 'Rita', lastname: `Round${round}`, email });
      assert.deepEqual(
        (await lookup(reader, `searchQuery=${email}`)).content.map((s) => s.email),
        [email],
        `round ${round}: created`,
      );
      await write(reader, 'PATCH', `/users/${id}`, { lastname: `Renamed${round}` });
      assert.equal((await lookup(writer, `searchQuery=renamed${round}`)).totalElements, 1, `round ${round}: renamed`);
      assert.equal((await lookup(writer, `searchQuery=round${round}`)).totalElements, 0, `round ${round}: old name gone`);
      await write(writer, 'PUT', `/rooms/board/members/${id}`);
      assert.deepEqual(
        (await lookup(reader, `searchQuery=${email}&purpose=SIGNING_REQUEST_SIGNATORY`)).content.map((s) => s.roomMember),
        [true],
        `round ${round}: member`,
      );
      await write(reader, 'PATCH', `/users/${id}`, { status: 'suspended' });
      assert.equal((await lookup(writer, `searchQuery=${email}`)).totalElements, 0, `round ${round}: suspended`);
      await write(writer, 'PATCH', `/users/${id}`, { status: 'active' });
      assert.equal((await lookup(reader, `searchQuery=${email}`)).totalElements, 1, `round ${round}: active again`);
      await write(reader, 'DELETE', `/users/${id}`);
      assert.equal((await lookup(writer, `searchQuery=${email}`)).totalElements, 0, `round ${round}: deleted`);
      assert.equal((await lookup(writer, 'purpose=SIGNING_REQUEST_SIGNATORY')).totalElements, 1, `round ${round}: left the room`);
    }
  });
});
