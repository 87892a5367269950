/**
 * Repeated lookups answered without the framework (src/http/answer-replay.ts), over real HTTP:
 * the same bytes and headers as the framework's answer, each with its own request id and log line,
 * and never once anything changed that the framework would answer otherwise.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { ACME, ACME_PASSWORD, DIRECTORY, OTHER } from '../helpers/fixtures.ts';
import { plainPinoLine } from '../../src/http/request-log.ts';
import { CapturedLog } from '../helpers/log.ts';
import { LOOKUP, addApiToken, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const AUTH = basic('acme-admin', ACME_PASSWORD);
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

describe('answers replayed while nothing changed', () => {
  let t: TestApp;
  let base: string;
  let clock = Date.now();
  const log = new CapturedLog();
  before(async () => {
    t = await startTestApp({ SIGNROOM_LOG_LEVEL: 'info', SIGNROOM_AUTH_CACHE_SECONDS: '60', SIGNROOM_METRICS_TOKEN: METRICS_TOKEN }, () => clock, log.stream);
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    // PostgreSQL: nothing is kept until the server listens for change notices (it starts on first use).
    for (let i = 0; i < 100 && t.app.database.changes.token() === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  });
  after(async () => t.close());

  const get = async (url: string, headers: Record<string, string> = { authorization: AUTH }) => {
    const before = t.app.answerReplay.replayed;
    const response = await fetch(`${base}${url}`, { headers });
    const body = Buffer.from(await response.arrayBuffer());
    return { response, body, replayed: t.app.answerReplay.replayed > before };
  };
  /** The headers a client sees, without those that differ per answer by nature. */
  const stableHeaders = (response: Response) => [...response.headers].filter(([name]) => !['x-request-id', 'date'].includes(name));

  it('answers a repeated lookup with the same bytes and headers, its own request id, and a log line', async () => {
    const url = `${LOOKUP('acme', 'board')}?size=2&searchQuery=m%C3%BCl`;
    const first = await get(url);
    assert.equal(first.response.status, 200);
    assert.equal(first.replayed, false, 'the first answer is computed');
    const again = await get(url, { authorization: AUTH, 'x-request-id': 'client-chosen.42' });
    assert.equal(again.replayed, true);
    assert.equal(again.response.status, 200);
    assert.deepEqual(again.body, first.body);
    assert.deepEqual(stableHeaders(again.response), stableHeaders(first.response));
    assert.equal(again.response.headers.get('cache-control'), 'no-store');
    assert.equal(again.response.headers.get('x-request-id'), 'client-chosen.42');
    const third = await get(url);
    assert.equal(third.replayed, true);
    assert.notEqual(third.response.headers.get('x-request-id'), first.response.headers.get('x-request-id'));
    const line = log.entries.find((entry) => entry['reqId'] === 'client-chosen.42');
    assert.ok(line !== undefined, 'the replayed request is logged with its id');
    assert.equal(line['msg'], 'request completed');
    assert.equal(line['statusCode'], 200);
    assert.equal(line['url'], url);
    // The replay formats its line itself (request-log.ts, completedLineWriter): the framework's, field for field.
    assert.ok(plainPinoLine(t.app.log) !== undefined, "the app's logger takes the hand-formatted line");
    const framework = log.entries.find((entry) => entry['reqId'] === first.response.headers.get('x-request-id'));
    assert.ok(framework !== undefined);
    assert.deepEqual(Object.keys(line), Object.keys(framework));
    const varying = (entry: Record<string, unknown>) => ({ ...entry, reqId: undefined, time: undefined, responseTime: undefined });
    assert.deepEqual(varying(line), varying(framework));
    assert.equal(typeof line['time'], 'number');
    assert.equal(typeof line['responseTime'], 'number');
  });

  it('never replays to another URL, another password or an organization the credential does not cover', async () => {
    const url = `${LOOKUP('acme', 'board')}?size=3`;
    await get(url);
    assert.equal((await get(url)).replayed, true);
    assert.equal((await get(`${url}&page=0`)).replayed, false, 'another URL is computed');
    const wrong = await get(url, { authorization: basic('acme-admin', 'not-the-password') });
    assert.equal(wrong.response.status, 401);
    assert.equal(wrong.replayed, false);
    for (let i = 0; i < 2; i++) {
      const forbidden = await get(LOOKUP('other', 'lobby'));
      assert.equal(forbidden.response.status, 403);
      assert.equal(forbidden.replayed, false);
    }
    for (let i = 0; i < 2; i++) assert.equal((await get(`${LOOKUP('acme', 'nope')}`)).response.status, 404);
  });

  it('shows a write through the API in the next lookup', async () => {
    const url = `${LOOKUP('acme', 'board')}?size=20&searchQuery=replayed`;
    const before = await get(url);
    assert.equal(JSON.parse(before.body.toString()).totalElements, 0);
    assert.equal((await get(url)).replayed, true);
    const created = await fetch(`${base}/admin/api/v3/organizations/acme/users`, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'u-replay', firstname: 'Replayed', lastname: 'Once', email: 'replayed@acme.example' }),
    });
    assert.equal(created.status, 201, await created.text());
    const after = await get(url);
    assert.equal(JSON.parse(after.body.toString()).totalElements, 1);
    assert.equal(after.replayed, true, 'the kept answer is computed again without the framework');
    assert.equal(after.response.headers.get('content-length'), String(after.body.length));
    const framework = await get(`${url}&page=0`);
    assert.equal(framework.replayed, false);
    assert.deepEqual(after.body, framework.body, "the framework's answer, byte for byte");
    assert.deepEqual(stableHeaders(after.response), stableHeaders(framework.response));
  });

  it('stops at once when another process changes the credential or revokes a token', async () => {
    const url = `${LOOKUP('acme', 'board')}?size=4`;
    const token = await addApiToken(t, 'acme');
    const bearer = { authorization: `Bearer ${token.secret}` };
    // A token's first use writes its lastUsedAt (a commit: nothing kept before it is replayed).
    await get(url, bearer);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await get(url);
    await get(url, bearer);
    assert.equal((await get(url)).replayed, true);
    assert.equal((await get(url, bearer)).replayed, true);
    // Another connection, as bin/signroom would: the import replaces the credential's password.
    await t.importDirectory({
      organizations: [ACME, OTHER],
      credentials: [
        { username: 'acme-admin', password: 'a-new-password', organizations: ['acme'] },
        { username: 'root', password: 'root-password', organizations: '*' },
      ],
    });
    const old = await get(url);
    assert.equal(old.response.status, 401);
    assert.equal(old.replayed, false);
    assert.equal((await get(url, { authorization: basic('acme-admin', 'a-new-password') })).response.status, 200);
    assert.equal((await get(url, bearer)).response.status, 200);
    await t.sql(sql`DELETE FROM api_tokens WHERE id = ${token.id}`);
    const revoked = await get(url, bearer);
    assert.equal(revoked.response.status, 401);
    assert.equal(revoked.replayed, false);
  });

  it('goes on replaying while a verification is verified again ahead of its end, so no request waits for a hash', async () => {
    const auth = { authorization: basic('root', 'root-password') };
    const url = `${LOOKUP('other', 'lobby')}?size=2`;
    clock += 61_000; // what earlier tests verified has run out
    await get(url, auth);
    assert.equal((await get(url, auth)).replayed, true);
    const hashes = t.app.authenticator.hashesComputed;
    clock += 41_000; // its last third: the replay asks again, which sets a verification off
    for (let i = 0; i < 4; i++) assert.equal((await get(url, auth)).replayed, true, `request ${i} in the last third`);
    for (let waited = 0; t.app.authenticator.hashesComputed === hashes && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(t.app.authenticator.hashesComputed, hashes + 1, 'verified again once, in the background');
    clock += 30_000; // past the end of the first verification
    assert.equal((await get(url, auth)).replayed, true);
    assert.equal(t.app.authenticator.hashesComputed, hashes + 1, 'no request waited for a hash');
  });

  it('checks the password again once its verification expires, and counts replayed answers in /metrics', async () => {
    const auth = { authorization: basic('root', 'root-password') };
    const url = `${LOOKUP('other', 'lobby')}?size=1`;
    await get(url, auth);
    assert.equal((await get(url, auth)).replayed, true);
    const hashes = t.app.authenticator.hashesComputed;
    clock += 61_000;
    const expired = await get(url, auth);
    assert.equal(expired.response.status, 200);
    assert.equal(expired.replayed, false, 'past its verification, a request goes through the framework');
    assert.equal(t.app.authenticator.hashesComputed, hashes + 1, 'which checks the password again');
    assert.equal((await get(url, auth)).replayed, true);

    const scraped = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const route = '/admin/api/v3/organizations/:organizationId/rooms/:signingRoomId/signatories/lookup';
    const counted = new RegExp(`signroom_http_requests_total\\{method="GET",route="${route.replaceAll('/', '\\/')}",status="200"\\} (\\d+)`).exec(scraped);
    assert.ok(counted !== null, scraped.slice(0, 500));
    // Every lookup answered 200 in this file, replayed or not, is logged once and counted once.
    const logged = log.entries.filter(
      (entry) => entry.msg === 'request completed' && entry['statusCode'] === 200 && String(entry['url']).includes('/signatories/lookup'),
    );
    assert.equal(Number(counted[1]), logged.length);
    const replay = t.app.answerReplay;
    assert.ok(replay.replayed > 0 && replay.renewed > 0 && replay.passedOn.notKept > 0);
    const metric = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(scraped)?.[1]);
    assert.equal(metric('signroom_replayed_answers_total'), replay.replayed);
    assert.equal(metric('signroom_renewed_answers_total'), replay.renewed);
    assert.equal(metric('signroom_replay_passed_on_total\\{reason="not_kept"\\}'), replay.passedOn.notKept);
    assert.equal(metric('signroom_replay_passed_on_total\\{reason="not_renewed"\\}'), replay.passedOn.notRenewed);
  });
});

describe('answers kept across changes of the directory, computed again without the framework', () => {
  let t: TestApp;
  let base: string;
  before(async () => {
    t = await startTestApp({ SIGNROOM_LOG_LEVEL: 'warn', SIGNROOM_AUTH_CACHE_SECONDS: '60', SIGNROOM_LOGIN_MAX_FAILURES: '3' });
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    for (let i = 0; i < 100 && t.app.database.changes.token() === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  });
  after(async () => t.close());

  const get = async (url: string, authorization = AUTH) => {
    const { replayed, renewed } = t.app.answerReplay;
    const response = await fetch(`${base}${url}`, { headers: { authorization } });
    const body = Buffer.from(await response.arrayBuffer());
    return { status: response.status, body, replayed: t.app.answerReplay.replayed > replayed, renewed: t.app.answerReplay.renewed > renewed };
  };
  const write = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}/admin/api/v3/organizations/acme${path}`, {
      method,
      headers: { authorization: AUTH, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    assert.ok(response.ok, `${method} ${path}: ${response.status} ${await response.text()}`);
  };

  it('replays the same answer after a write it does not show, and the new one after a write it shows', async () => {
    const url = `${LOOKUP('acme', 'board')}?size=5&searchQuery=m%C3%BCller`;
    const first = await get(url);
    assert.equal((await get(url)).replayed, true);
    await write('POST', '/users', { id: 'u-elsewhere', firstname: 'Zed', lastname: 'Zimmer', email: 'zed@acme.example' });
    const untouched = await get(url);
    assert.equal(untouched.status, 200);
    assert.equal(untouched.renewed, true);
    assert.equal(untouched.replayed, true);
    assert.deepEqual(untouched.body, first.body);
    await write('PATCH', '/users/u-elsewhere', { lastname: 'Müller-Zimmer' });
    const shown = await get(url);
    assert.equal(shown.renewed, true);
    const page = JSON.parse(shown.body.toString()) as { totalElements: number; content: { email: string }[] };
    assert.equal(page.totalElements, JSON.parse(first.body.toString()).totalElements + 1);
    assert.ok(page.content.some((signatory) => signatory.email === 'zed@acme.example'));
    assert.equal((await get(url)).replayed, true, 'and then replays that');
  });

  it('leaves to the framework a room deleted, a credential that no longer covers the organization, and a throttled username', async () => {
    const gone = `${LOOKUP('acme', 'empty')}?size=5`;
    await get(gone);
    assert.equal((await get(gone)).replayed, true);
    await write('DELETE', '/rooms/empty');
    const deleted = await get(gone);
    assert.equal(deleted.status, 404);
    assert.equal(deleted.replayed, false);

    const url = `${LOOKUP('acme', 'board')}?size=6`;
    await get(url);
    assert.equal((await get(url)).replayed, true);
    for (let k = 0; k < 3; k++) assert.equal((await get(url, basic('acme-admin', `wrong-${k}`))).status, 401);
    const throttled = await get(url);
    assert.equal(throttled.status, 429, 'too many failed logins of the username from this address: refused, though kept');
    assert.equal(throttled.replayed, false);

    const root = basic('root', 'root-password');
    const other = `${LOOKUP('other', 'lobby')}?size=2`;
    await get(other, root);
    assert.equal((await get(other, root)).replayed, true);
    // Another connection, as bin/signroom would: root now covers acme only.
    await t.importDirectory({
      organizations: [ACME, OTHER],
      credentials: [
        { username: 'acme-admin', password: ACME_PASSWORD, organizations: ['acme'] },
        { username: 'root', password: 'root-password', organizations: ['acme'] },
      ],
    });
    const forbidden = await get(other, root);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.replayed, false);
  });
});
