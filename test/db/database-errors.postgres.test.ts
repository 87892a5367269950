import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { freePort, runCli } from '../helpers/cli.ts';
import { freshDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/databases.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { CuttableProxy, refusingPostgres } from '../helpers/tcp.ts';
import { basic, freshDataDir, LOOKUP, startTestApp, type TestApp } from '../helpers/test-app.ts';

const SECRET = 's3cret-Pa55';

describe('PostgreSQL that cannot be reached or refuses us', () => {
  it('refuses to start when the database is down: clear message, exit 1, no secret printed', async () => {
    const port = await freePort();
    const result = await runCli(['serve'], {
      SIGNROOM_DATA_DIR: freshDataDir(),
      DATABASE_URL: `postgres://signroom:${SECRET}@127.0.0.1:${port}/signroom`,
      PORT: String(await freePort()),
    });
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(`cannot use the database postgres://signroom@127\\.0\\.0\\.1:${port}/signroom: connection refused \\(is PostgreSQL running`),
    );
    assert.doesNotMatch(result.stderr + result.stdout, new RegExp(SECRET));
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
  });

  it('names a wrong password without printing it', async () => {
    const server = await refusingPostgres('28P01', 'password authentication failed for user "signroom"');
    try {
      const result = await runCli(['migrate'], {
        SIGNROOM_DATA_DIR: freshDataDir(),
        DATABASE_URL: `postgres://signroom:${SECRET}@127.0.0.1:${server.port}/signroom`,
      });
      assert.equal(result.code, 1);
      assert.match(result.stderr, /password authentication failed for user "signroom" \(check the user and password in DATABASE_URL\)/);
      assert.doesNotMatch(result.stderr + result.stdout, new RegExp(SECRET));
    } finally {
      await server.close();
    }
  });

  it('names an unknown host', async () => {
    const result = await runCli(['migrate'], {
      SIGNROOM_DATA_DIR: freshDataDir(),
      DATABASE_URL: `postgres://signroom:${SECRET}@no-such-host.invalid:5432/signroom`,
    });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /cannot use the database postgres:\/\/signroom@no-such-host\.invalid:5432\/signroom: unknown host "no-such-host\.invalid"/);
    assert.doesNotMatch(result.stderr + result.stdout, new RegExp(SECRET));
  });
});

describe('PostgreSQL lost while serving', () => {
  let database: TestDatabase;
  let proxy: CuttableProxy;
  let t: TestApp;
  const auth = basic('root', 'root-password');
  const lookup = () => t.app.inject({ url: `${LOOKUP('acme', 'board')}?size=1`, headers: { authorization: auth } });

  before(async () => {
    database = await freshDatabase('postgres');
    const target = new URL(POSTGRES_ADMIN_URL);
    proxy = new CuttableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.open();
    const url = new URL(database.env['DATABASE_URL']!);
    url.host = `127.0.0.1:${proxy.port}`;
    t = await startTestApp({ DATABASE_URL: url.toString() });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => {
    await t.close();
    await proxy.cut();
    await database.drop();
  });

  it('answers 503 problem+json while the database is gone, and recovers without a restart', async () => {
    assert.equal((await lookup()).statusCode, 200);
    await proxy.cut();

    const down = await lookup();
    assert.equal(down.statusCode, 503);
    assert.match(String(down.headers['content-type']), /^application\/problem\+json/);
    assert.equal(down.json().code, 'service-unavailable');
    assert.equal(down.headers['retry-after'], '5');
    assert.doesNotMatch(down.body, /ECONNREFUSED|127\.0\.0\.1|postgres/i, 'no internals');
    const notReady = await t.app.inject({ url: '/readyz' });
    assert.equal(notReady.statusCode, 503);
    assert.equal(notReady.json().code, 'service-unavailable');

    await proxy.open();
    const back = await lookup();
    assert.equal(back.statusCode, 200, back.body);
    assert.equal(back.json().numberOfElements, 1);
    assert.equal((await t.app.inject({ url: '/readyz' })).statusCode, 200);
  });

  it('answers a directory write 503 while the database is gone, and leaves nothing half-written', async () => {
    const write = () =>
      t.app.inject({
        method: 'POST',
        url: '/admin/api/v3/organizations/acme/users',
        headers: { authorization: auth, 'content-type': 'application/json' },
        payload: JSON.stringify({ id: 'while-down', email: 'down@acme.example' }),
      });
    const events = async () => (await t.sql<{ n: string }>(sql`select count(*) as n from audit_events`))[0]!.n;
    const before = await events();
    await proxy.cut();
    const down = await write();
    assert.equal(down.statusCode, 503, down.body);
    assert.equal(down.json().code, 'service-unavailable');
    await proxy.open();
    assert.equal((await t.sql(sql`select id from users where id = 'while-down'`)).length, 0);
    assert.equal(await events(), before);
    const back = await write();
    assert.equal(back.statusCode, 201, back.body);
  });
});
