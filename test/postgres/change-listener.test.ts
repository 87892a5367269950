import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { PostgresChangeListener } from '../../src/db/change-listener.ts';
import { migrateToLatest, openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { freshDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/databases.ts';
import { CuttableProxy } from '../helpers/tcp.ts';
import { freshDataDir } from '../helpers/test-app.ts';

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
        `INSERT INTO login_failures (username, failures, window_start) VALUES ('user-$n', 1, 0)`,
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
