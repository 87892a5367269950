/**
 * Abuse of the login (issue 24): made-up usernames cost no hash, a stranger's failures do not lock
 * out the owner, one address that fails too often is turned away, the hash queue is bounded, and
 * each of these is logged once for the operator.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { CapturedLog } from '../helpers/log.ts';
import { clientKey } from '../../src/auth/failure-windows.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const lookup = (t: TestApp, authorization: string, remoteAddress: string, headers: Record<string, string> = {}) =>
  t.app.inject({ url: LOOKUP('acme', 'board'), remoteAddress, headers: { authorization, ...headers } });

describe('login abuse', () => {
  let t: TestApp;
  const log = new CapturedLog();
  before(async () => {
    t = await startTestApp(
      { SIGNROOM_LOGIN_MAX_FAILURES: '5', SIGNROOM_LOGIN_MAX_FAILURES_PER_ADDRESS: '20', SIGNROOM_LOG_LEVEL: 'warn' },
      undefined,
      log.stream,
    );
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('answers 200 made-up usernames from many addresses without a hash, and a real first login beside them', async () => {
    const hashesBefore = t.app.authenticator.hashesComputed;
    const flood = Array.from({ length: 200 }, (_, i) => lookup(t, basic(`made-up-${i}`, 'guess'), `10.1.${i >> 8}.${i & 255}`));
    const real = lookup(t, basic('root', 'root-password'), '10.9.9.9');
    const [answers, mine] = await Promise.all([Promise.all(flood), real]);
    assert.equal(mine.statusCode, 200, mine.body);
    assert.deepEqual([...new Set(answers.map((answer) => answer.statusCode))], [401]);
    assert.deepEqual(
      answers.map((answer) => answer.json().code),
      answers.map(() => 'unauthorized'),
    );
    assert.equal(t.app.authenticator.hashesComputed - hashesBefore, 1, 'only the real login computed a hash');
  });

  it("does not let a stranger's failures lock out the owner, who signs in from their own address", async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      assert.equal((await lookup(t, basic('acme-admin', `guess-${attempt}`), '203.0.113.7')).statusCode, 401);
    }
    const stranger = await lookup(t, basic('acme-admin', ACME_PASSWORD), '203.0.113.7');
    assert.equal(stranger.statusCode, 429);
    assert.match(stranger.json().detail, /for this username/);
    assert.ok(Number(stranger.headers['retry-after']) > 0);
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '198.51.100.20')).statusCode, 200);
    const events = log.events('login.throttled').filter((line) => line['client'] === '203.0.113.7');
    assert.equal(events.length, 1);
    assert.equal(events[0]?.['by'], 'username');
    assert.match(String(events[0]?.['user']), /^[0-9a-f]{12}$/, 'the username as a short hash');
    assert.ok(!log.lines.some((line) => line.includes('acme-admin')), 'no username in the log');
  });

  it('turns away an address that fails too often, whatever the usernames, and logs each failure once', async () => {
    const address = '192.0.2.66';
    const before = log.events('login.failed').filter((line) => line['client'] === address).length;
    for (let i = 0; i < 20; i++) assert.equal((await lookup(t, basic(`someone-${i}`, 'guess'), address)).statusCode, 401);
    assert.equal(log.events('login.failed').filter((line) => line['client'] === address).length - before, 20);
    // Even the right password of a credential not verified lately is refused from there.
    await t.importDirectory({ organizations: [], credentials: [{ username: 'new-admin', password: 'new-admin-password', organizations: ['acme'] }] });
    const refused = await lookup(t, basic('new-admin', 'new-admin-password'), address);
    assert.equal(refused.statusCode, 429);
    assert.match(refused.json().detail, /from this address/);
    assert.equal((await lookup(t, basic('new-admin', 'new-admin-password'), '192.0.2.67')).statusCode, 200, 'another address is not affected');
    // A password verified a moment ago still works from there (people behind one address keep working).
    assert.equal((await lookup(t, basic('new-admin', 'new-admin-password'), address)).statusCode, 200);
    assert.equal(log.events('login.throttled').filter((line) => line['client'] === address && line['by'] === 'address').length, 1);
  });
});

describe('login abuse behind a proxy and with a full hash queue', () => {
  let t: TestApp;
  const log = new CapturedLog();
  before(async () => {
    t = await startTestApp(
      {
        SIGNROOM_LOGIN_MAX_FAILURES: '3',
        SIGNROOM_LOGIN_HASH_CONCURRENCY: '1',
        SIGNROOM_LOGIN_HASH_QUEUE: '0',
        SIGNROOM_TRUSTED_PROXIES: '127.0.0.1',
        SIGNROOM_LOG_LEVEL: 'warn',
      },
      undefined,
      log.stream,
    );
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('counts failures by the address a trusted proxy forwards', async () => {
    const via = (client: string) => ({ 'x-forwarded-for': client });
    for (let attempt = 0; attempt < 3; attempt++) {
      assert.equal((await lookup(t, basic('root', `guess-${attempt}`), '127.0.0.1', via('198.51.100.1'))).statusCode, 401);
    }
    assert.equal((await lookup(t, basic('root', 'root-password'), '127.0.0.1', via('198.51.100.1'))).statusCode, 429);
    assert.equal((await lookup(t, basic('root', 'root-password'), '127.0.0.1', via('198.51.100.2'))).statusCode, 200);
    // A peer that is not a trusted proxy cannot choose its address by the header.
    for (let attempt = 0; attempt < 3; attempt++) {
      await lookup(t, basic('acme-admin', `guess-${attempt}`), '10.0.0.5', via(`198.51.100.${100 + attempt}`));
    }
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '10.0.0.5', via('198.51.100.200'))).statusCode, 429);
  });

  it('answers 503 with Retry-After when every hash slot and the queue are taken, and never queues a verified credential', async () => {
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '10.2.0.1')).statusCode, 200);
    const attempts = await Promise.all(Array.from({ length: 4 }, (_, i) => lookup(t, basic('root', `wrong-${i}`), `10.3.0.${i}`)));
    const busy = attempts.filter((answer) => answer.statusCode === 503);
    assert.ok(busy.length >= 1, attempts.map((answer) => answer.statusCode).join());
    for (const answer of busy) {
      assert.equal(answer.headers['retry-after'], '1');
      assert.equal(answer.json().code, 'service-unavailable');
    }
    // Verified a moment ago: answered from the cache, beside a full queue.
    const during = Promise.all(Array.from({ length: 3 }, (_, i) => lookup(t, basic('root', `again-${i}`), `10.4.0.${i}`)));
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '10.2.0.1')).statusCode, 200);
    await during;
    assert.ok(log.events('login.busy').length > 0);
  });
});

describe('login limits and the people who logged in before', () => {
  let t: TestApp;
  before(async () => {
    // No verified-password cache: only the remembered username and address pairs let anyone past a limit.
    t = await startTestApp({
      SIGNROOM_AUTH_CACHE_SECONDS: '0',
      SIGNROOM_LOGIN_MAX_FAILURES: '2',
      SIGNROOM_LOGIN_MAX_FAILURES_PER_ADDRESS: '5',
      SIGNROOM_LOGIN_HASH_CONCURRENCY: '1',
      SIGNROOM_LOGIN_HASH_QUEUE: '0',
    });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('lets a username that logged in from an address back in after strangers there filled its limit (one NAT)', async () => {
    const office = '198.51.100.50';
    assert.equal((await lookup(t, basic('root', 'root-password'), office)).statusCode, 200);
    for (let i = 0; i < 5; i++) assert.equal((await lookup(t, basic(`stranger-${i}`, 'guess'), office)).statusCode, 401);
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), office)).statusCode, 429, 'a username not seen from there is refused');
    assert.equal((await lookup(t, basic('root', 'root-password'), office)).statusCode, 200, 'root logged in from there before');
  });

  it('refuses a username many addresses failed, except from where its owner logged in', async () => {
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '203.0.113.200')).statusCode, 200);
    // Two failures from each of ten addresses: twenty, ten times the limit of one pair.
    for (let i = 0; i < 10; i++) {
      for (let attempt = 0; attempt < 2; attempt++) {
        assert.equal((await lookup(t, basic('acme-admin', `guess-${attempt}`), `203.0.113.${i}`)).statusCode, 401);
      }
    }
    const elsewhere = await lookup(t, basic('acme-admin', ACME_PASSWORD), '203.0.113.99');
    assert.equal(elsewhere.statusCode, 429);
    assert.match(elsewhere.json().detail, /for this username/);
    assert.equal((await lookup(t, basic('acme-admin', ACME_PASSWORD), '203.0.113.200')).statusCode, 200, "from the owner's address");
  });

  it('answers busy alike for a username that exists and one that does not, while every hash slot is taken', async () => {
    const slow = lookup(t, basic('root', 'wrong-password'), '192.0.2.10');
    await new Promise((resolve) => setImmediate(resolve));
    const [known, unknown] = await Promise.all([lookup(t, basic('root', 'another-wrong'), '192.0.2.11'), lookup(t, basic('nobody-here', 'x'), '192.0.2.12')]);
    await slow;
    assert.deepEqual([known.statusCode, unknown.statusCode], [503, 503]);
  });
});

describe('clientKey', () => {
  it('counts IPv4 addresses as they are and IPv6 addresses by their /64', () => {
    assert.equal(clientKey('203.0.113.7'), '203.0.113.7');
    assert.equal(clientKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(clientKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(clientKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64');
    assert.equal(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(clientKey('::1'), '0:0:0:0::/64');
  });
});
