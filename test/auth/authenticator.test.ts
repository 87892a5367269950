import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const CHALLENGE = 'Basic realm="signroom", charset="UTF-8"';

describe('authentication and scope', () => {
  let t: TestApp;
  let clock = Date.now();
  const lookup = (authorization?: string, org = 'acme') =>
    t.app.inject({ url: LOOKUP(org, 'board'), headers: authorization === undefined ? {} : { authorization } });

  before(async () => {
    t = await startTestApp({ SIGNROOM_LOGIN_MAX_FAILURES: '3', SIGNROOM_LOGIN_LOCK_SECONDS: '60' }, () => clock);
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('accepts a password with colons and non-ASCII characters', async () => {
    const response = await lookup(basic('acme-admin', ACME_PASSWORD));
    assert.equal(response.statusCode, 200);
  });

  for (const [name, header] of [
    ['a missing header', undefined],
    ['another scheme', 'Bearer abc.def'],
    ['invalid base64', 'Basic ***'],
    ['no colon', `Basic ${Buffer.from('acme-admin').toString('base64')}`],
    ['an empty header', ''],
  ] as const) {
    it(`answers 401 with a challenge for ${name}`, async () => {
      const response = await lookup(header);
      assert.equal(response.statusCode, 401);
      assert.equal(response.headers['www-authenticate'], CHALLENGE);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(response.json().code, 'unauthorized');
    });
  }

  it('answers an unknown user exactly like a wrong password', async () => {
    const wrong = await lookup(basic('root', 'not-the-password'));
    const unknown = await lookup(basic('nobody', 'not-the-password'));
    for (const response of [wrong, unknown]) {
      assert.equal(response.statusCode, 401);
      assert.equal(response.headers['www-authenticate'], CHALLENGE);
    }
    assert.deepEqual(wrong.json(), unknown.json());
  });

  it('answers 403 for another organization, existing or not, before validating parameters', async () => {
    for (const org of ['other', 'does-not-exist']) {
      const response = await t.app.inject({
        url: `${LOOKUP(org, 'lobby')}?page=-1`,
        headers: { authorization: basic('acme-admin', ACME_PASSWORD) },
      });
      assert.equal(response.statusCode, 403);
      assert.equal(response.json().code, 'forbidden');
    }
  });

  it('slows repeated failures, then answers 429 with Retry-After until the window passes', async () => {
    const attempt = () => lookup(basic('acme-admin', 'guess'));
    assert.equal((await attempt()).statusCode, 401);
    // The second failure is answered after a back-off on top of the hash (the hook waits delayMs).
    const second = await t.app.authenticator.authenticate(basic('acme-admin', 'guess'), performance.now(), '127.0.0.1');
    assert.deepEqual(second, { kind: 'rejected', delayMs: 100, username: 'acme-admin' });
    assert.equal((await attempt()).statusCode, 401); // the third failure locks
    const locked = await lookup(basic('acme-admin', ACME_PASSWORD));
    assert.equal(locked.statusCode, 429);
    assert.equal(locked.json().code, 'too-many-requests');
    const retryAfter = Number(locked.headers['retry-after']);
    assert.ok(retryAfter >= 59 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    // Another username is not affected.
    assert.equal((await lookup(basic('root', 'root-password'))).statusCode, 200);

    clock += 61_000;
    assert.equal((await lookup(basic('acme-admin', ACME_PASSWORD))).statusCode, 200);
  });

  it('does not let attempts sent all at once slip past the limit', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => lookup(basic('acme-admin', `parallel-guess-${i}`))));
    const statuses = answers.map((response) => response.statusCode);
    assert.ok(statuses.filter((status) => status === 401).length <= 3, statuses.join());
    assert.ok(statuses.includes(429), statuses.join());
    clock += 61_000;
    assert.equal((await lookup(basic('acme-admin', ACME_PASSWORD))).statusCode, 200);
  });

  it('answers overlong credentials without tracking them', async () => {
    const response = await lookup(basic('x'.repeat(5000), 'y'));
    assert.equal(response.statusCode, 401);
    assert.equal(response.headers['www-authenticate'], CHALLENGE);
  });

  it('answers a username with control characters (U+0000 too) with a plain 401', async () => {
    for (const username of ['acme\u0000admin', '\u0000', 'acme-admin\n']) {
      const response = await lookup(basic(username, ACME_PASSWORD));
      assert.equal(response.statusCode, 401, `${JSON.stringify(username)}: ${response.body}`);
      assert.equal(response.headers['www-authenticate'], CHALLENGE);
      assert.equal(response.json().code, 'unauthorized');
    }
  });

  it('stops accepting a revoked or changed credential at once, despite the cache', async () => {
    const header = basic('root', 'root-password');
    assert.equal((await lookup(header)).statusCode, 200);
    await t.sql(sql`UPDATE credentials SET password_hash = '$scrypt$ln=14,r=8,p=5$AAAA$AAAA' WHERE username = 'root'`);
    assert.equal((await lookup(header)).statusCode, 401);
    await t.sql(sql`DELETE FROM credentials WHERE username = 'root'`);
    assert.equal((await lookup(header)).statusCode, 401);
    await t.importDirectory(DIRECTORY);
    assert.equal((await lookup(header)).statusCode, 200);
  });

  it('verifies a password again before its verification expires, so a client that keeps calling never waits for a hash', async () => {
    const authenticator = t.app.authenticator;
    const header = basic('root', 'root-password');
    const authenticate = async () => (await authenticator.authenticate(header, performance.now(), '127.0.0.1')).kind;
    const recheck = async () => (await authenticator.recheck(header, performance.now(), '127.0.0.1')) !== undefined;
    clock += 61_000; // whatever an earlier test verified has expired
    const before = authenticator.hashesComputed;
    assert.equal(await authenticate(), 'authenticated');
    assert.equal(authenticator.hashesComputed, before + 1, 'expired: verified again before answering');
    clock += 30_000; // half its life left: nothing to do
    assert.equal(await authenticate(), 'authenticated');
    assert.equal(await recheck(), true);
    assert.equal(authenticator.hashesComputed, before + 1);
    clock += 15_000; // 15 s of 60 left: answered at once, verified again meanwhile
    // Due since 20 s were left: the answer replay asks again (recheck) from then on, every second while it runs.
    assert.ok((await authenticator.recheck(header, performance.now(), '127.0.0.1'))!.validUntil <= clock + 1_000);
    for (let waited = 0; authenticator.hashesComputed < before + 2 && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(authenticator.hashesComputed, before + 2);
    assert.equal(await authenticate(), 'authenticated', 'while it ran, the verification still held');
    assert.ok((await authenticator.recheck(header, performance.now(), '127.0.0.1'))!.validUntil >= clock + 39_000, 'renewed: due again in 40 s');
    clock += 30_000; // past the first verification's end, within the second's
    assert.equal(await authenticate(), 'authenticated');
    assert.equal(await recheck(), true);
    assert.equal(authenticator.hashesComputed, before + 2, 'no request waited for a hash');
    // A changed password still stops it at once, refreshed or not.
    await t.sql(sql`UPDATE credentials SET password_hash = '$scrypt$ln=14,r=8,p=5$AAAA$AAAA' WHERE username = 'root'`);
    assert.equal(await recheck(), false);
    assert.equal((await lookup(header)).statusCode, 401);
    await t.importDirectory(DIRECTORY);
  });

  it('serves the OpenAPI document and health without credentials', async () => {
    for (const url of ['/admin/api/v3/openapi.json', '/livez', '/readyz']) {
      assert.equal((await t.app.inject({ url })).statusCode, 200, url);
    }
  });
});
