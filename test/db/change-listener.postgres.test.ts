import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { PostgresChangeListener } from '../../src/db/change-listener.ts';
import { migrateToLatest, openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { freshDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/databases.ts';
import { CuttableProxy } from '../helpers/tcp.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { basic, freshDataDir, LOOKUP, startTestApp } from '../helpers/test-app.ts';
import { sql } from 'kysely';
import { ConfigError } from '../../src/config.ts';

/** Polls until the listener reports a token (it starts listening on its first call). */
async function listening(listener: PostgresChangeListener): Promise<number> {
  for (let attempt = 0; attempt < 500; attempt += 1) {
    const token = listener.token();
    if (token !== undefined) return token;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the listener never started listening');
}

describe('PostgreSQL change notices', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let writer: pg.Client;

  before(async () => {
    database = await freshDatabase('postgres');
    handle = openDatabase(loadConfig({ SIGNROOM_DATA_DIR: freshDataDir(), ...database.env }));
    await migrateToLatest(handle);
    // Another process's connection, as the CLI's would be.
    writer = new pg.Client({ connectionString: database.env['DATABASE_URL'] });
    await writer.connect();
  });

  after(async () => {
    await writer.end();
    await handle.close();
    await database.drop();
  });

  it('has moved, once catchUp() resolves, for every commit made before it was called', async () => {
    const listener = new PostgresChangeListener(database.env['DATABASE_URL']!);
    try {
      await listening(listener);
      const watched = [
        `INSERT INTO organizations (id, name) VALUES ('org-$n', 'Org') `,
        `UPDATE organizations SET directory_version = directory_version + 1`,
        `INSERT INTO rooms (org_id, id, name) VALUES ('org-$n', 'room', 'Room')`,
        `INSERT INTO credentials (username, password_hash, organizations, updated_at) VALUES ('user-$n', 'x', '"*"', 'now')`,
        `UPDATE credentials SET password_hash = 'y'`,
        `INSERT INTO login_failures (username, client, failures, window_start) VALUES ('user-$n', '127.0.0.1', 1, 0)`,
        `DELETE FROM login_failures`,
        `DELETE FROM credentials`,
      ];
      for (let round = 0; round < 25; round += 1) {
        for (const statement of watched) {
          const before = listener.token();
          await writer.query(statement.replaceAll('$n', String(round)));
          await listener.catchUp(performance.now());
          assert.notEqual(listener.token(), before, `round ${round}: ${statement}`);
        }
      }
      // Nothing committed: the token stays, so what was read stays kept.
      const quiet = listener.token();
      await writer.query('SELECT count(*) FROM organizations');
      const arrived = performance.now();
      await Promise.all([listener.catchUp(arrived), listener.catchUp(arrived), listener.catchUp(performance.now())]);
      assert.equal(listener.token(), quiet);
      // A moment caught up already needs no further query (a request's second read).
      assert.equal(listener.catchUp(arrived), undefined);
    } finally {
      await listener.close();
    }
  });

  it('tells each reader only of commits to the tables it names, and of notices naming none', async () => {
    const listener = new PostgresChangeListener(database.env['DATABASE_URL']!);
    try {
      await listening(listener);
      const credentials = listener.about(['credentials', 'login_failures']);
      const directory = listener.about(['organizations', 'rooms']);
      const commit = async (statement: string) => {
        const before = { all: listener.token(), credentials: credentials.token(), directory: directory.token() };
        await writer.query(statement);
        await listener.catchUp(performance.now());
        return {
          all: listener.token() !== before.all,
          credentials: credentials.token() !== before.credentials,
          directory: directory.token() !== before.directory,
        };
      };
      await commit(`INSERT INTO organizations (id, name) VALUES ('scoped', 'Org')`);
      assert.deepEqual(await commit(`UPDATE organizations SET directory_version = directory_version + 1 WHERE id = 'scoped'`), {
        all: true,
        credentials: false,
        directory: true,
      });
      assert.deepEqual(await commit(`INSERT INTO credentials (username, password_hash, organizations, updated_at) VALUES ('scoped', 'x', '"*"', 'now')`), {
        all: true,
        credentials: true,
        directory: false,
      });
      assert.deepEqual(await commit(`INSERT INTO rooms (org_id, id, name) VALUES ('scoped', 'room', 'Room')`), {
        all: true,
        credentials: false,
        directory: true,
      });
      // A notice naming no table (a server from before notices named theirs) may be of any.
      assert.deepEqual(await commit(`NOTIFY signroom_changes`), { all: true, credentials: true, directory: true });
      await writer.query(`DELETE FROM credentials WHERE username = 'scoped'`);
    } finally {
      await listener.close();
    }
  });

  it('never misses a commit made before a call while many callers share catch-up queries, heartbeats among them', { timeout: 60_000 }, async () => {
    const listener = new PostgresChangeListener(database.env['DATABASE_URL']!);
    try {
      await listening(listener);
      const listenerBackend = async () =>
        (
          await writer.query<{ pid: number; query: string; query_start: Date }>(
            `SELECT pid, query, query_start FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'signroom-changes'`,
          )
        ).rows[0];
      const first = await listenerBackend();
      assert.match(first?.query ?? '', /pg_listening_channels/);
      const started = performance.now();
      // Callers that keep a catch-up query out nearly all the time, so that a caller often finds
      // one that was sent before its moment (and must wait for the next one).
      let running = true;
      const busy = Array.from({ length: 12 }, async () => {
        while (running) await (listener.catchUp(performance.now()) ?? new Promise((resolve) => setImmediate(resolve)));
      });
      let checks = 0;
      // Past two heartbeats (every 2 s), whose query goes out between the catch-ups' Sync messages.
      let round = 0;
      for (; round < 500 || performance.now() - started < 4_500; round += 1) {
        const before = listener.token();
        await writer.query('UPDATE organizations SET directory_version = directory_version + 1');
        const asOf = performance.now();
        await Promise.all(
          Array.from({ length: 6 }, async () => {
            await listener.catchUp(asOf);
            assert.equal(typeof listener.token(), 'number', `round ${round}: still listening`);
            assert.notEqual(listener.token(), before, `round ${round}`);
            checks += 1;
          }),
        );
      }
      running = false;
      await Promise.all(busy);
      assert.equal(checks, round * 6);
      // On the same connection throughout, which ran a heartbeat's statement since (Syncs are none).
      const last = await listenerBackend();
      assert.equal(last?.pid, first?.pid);
      assert.match(last?.query ?? '', /pg_listening_channels/);
      assert.ok(last!.query_start > first!.query_start, 'a heartbeat ran among the Syncs');
    } finally {
      await listener.close();
    }
  });

  it('ends its connection on close()', async () => {
    const listener = new PostgresChangeListener(database.env['DATABASE_URL']!);
    await listening(listener);
    const listeners = async () =>
      Number(
        (await writer.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'signroom-changes'`)).rows[0]
          .n,
      );
    assert.equal(await listeners(), 1);
    await listener.close();
    assert.equal(listener.token(), undefined);
    for (let attempt = 0; attempt < 100 && (await listeners()) > 0; attempt += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(await listeners(), 0);
  });

  it('has no token while its connection is lost, and a new one once it listens again', async () => {
    const target = new URL(POSTGRES_ADMIN_URL);
    const proxy = new CuttableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.open();
    const url = new URL(database.env['DATABASE_URL']!);
    url.host = `127.0.0.1:${proxy.port}`;
    const listener = new PostgresChangeListener(url.toString());
    try {
      const first = await listening(listener);
      await proxy.cut();
      for (let attempt = 0; attempt < 500 && listener.token() !== undefined; attempt += 1) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(listener.token(), undefined, 'nothing may be kept while notices cannot arrive');
      assert.equal(listener.catchUp(performance.now()), undefined);
      // A change nobody heard of while the connection was down.
      await writer.query(`UPDATE organizations SET directory_version = directory_version + 1`);
      await proxy.open();
      const second = await listening(listener);
      assert.notEqual(second, first, 'what was kept before the loss is forgotten');
    } finally {
      await listener.close();
      await proxy.cut();
    }
  });
});

describe('SIGNROOM_DB_CHANGE_NOTICES', () => {
  /** The server's listening connections on its database, after it has answered a few lookups. */
  async function listenersAfterLookups(env: Record<string, string>): Promise<number> {
    const t = await startTestApp(env);
    try {
      await t.importDirectory(DIRECTORY);
      for (let i = 0; i < 3; i += 1) {
        const response = await t.app.inject({ url: `${LOOKUP('acme', 'board')}?size=1`, headers: { authorization: basic('root', 'root-password') } });
        assert.equal(response.statusCode, 200);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const rows = await t.sql<{ count: string }>(
        sql`SELECT count(*) AS count FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'signroom-changes'`,
      );
      return Number(rows[0]!.count);
    } finally {
      await t.close();
    }
  }

  it('listens on one connection by default, and not at all when off (behind a pooler in transaction mode)', async () => {
    assert.equal(await listenersAfterLookups({}), 1);
    assert.equal(await listenersAfterLookups({ SIGNROOM_DB_CHANGE_NOTICES: 'off' }), 0);
  });

  it('refuses any other value', () => {
    assert.throws(() => loadConfig({ SIGNROOM_DB_CHANGE_NOTICES: 'yes' }), ConfigError);
  });
});
