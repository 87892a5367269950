import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { PROBLEMS } from '../../src/errors.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

describe('errors, request ids and operability', () => {
  let t: TestApp;
  const auth = basic('root', 'root-password');

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('answers unknown routes with a 404 problem', async () => {
    for (const url of ['/nope', '/admin/api/v3/organizations/acme/nope', '/admin/api/v2/x']) {
      const response = await t.app.inject({ url, headers: { authorization: auth } });
      assert.equal(response.statusCode, 404);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.deepEqual(Object.keys(response.json()).sort(), ['code', 'detail', 'instance', 'status', 'title', 'type']);
      assert.equal(response.json().code, 'route-not-found');
    }
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const response = await t.app.inject({ method: 'DELETE', url: LOOKUP('acme', 'board'), headers: { authorization: auth } });
    assert.equal(response.statusCode, 405);
    assert.equal(response.headers['allow'], 'GET, HEAD');
    assert.equal(response.json().code, 'method-not-allowed');
  });

  it('answers TRACE with 405 too, echoing nothing of the request', async () => {
    const response = await t.app.inject({ method: 'TRACE', url: LOOKUP('acme', 'board'), headers: { authorization: auth } });
    assert.equal(response.statusCode, 405);
    assert.equal(response.headers['allow'], 'GET, HEAD');
    assert.equal(response.json().code, 'method-not-allowed');
    assert.ok(!response.body.includes(auth), 'the credential is not echoed');
  });

  it('answers malformed URLs and overlong path segments with problems', async () => {
    const badEncoding = await t.app.inject({ url: '/admin/api/v3/organizations/%/rooms/board/signatories/lookup' });
    assert.equal(badEncoding.statusCode, 400);
    assert.equal(badEncoding.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(badEncoding.json().code, 'malformed-request');
    assert.equal(badEncoding.json().errors[0].parameter, 'url');
    const long = await t.app.inject({ url: LOOKUP('a'.repeat(300), 'board'), headers: { authorization: auth } });
    assert.equal(long.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(long.json().code, 'route-not-found');
  });

  it('answers oversized headers on the wire with a problem', async () => {
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { connect } = await import('node:net');
    const url = new URL(address);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(`GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      });
      let data = '';
      socket.on('data', (chunk) => (data += chunk));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    assert.match(raw, /^HTTP\/1\.1 431 /);
    assert.match(raw, /content-type: application\/problem\+json/i);
    assert.match(raw, /"code":"headers-too-large"/);
  });

  it('answers a URL too long for the server with 414 naming it, not 431 about headers', async () => {
    if (!t.app.server.listening) await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { connect } = await import('node:net');
    const url = new URL(`http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`);
    const target = `${LOOKUP('acme', 'board')}?searchQuery=${'a'.repeat(20_000)}`;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`);
      });
      let data = '';
      socket.on('data', (chunk) => (data += chunk));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    assert.match(raw, /^HTTP\/1\.1 414 /);
    assert.match(raw, /content-type: application\/problem\+json/i);
    const problem = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { code: string; detail: string; status: number };
    assert.equal(problem.code, 'uri-too-long');
    assert.equal(problem.status, 414);
    assert.ok(problem.detail.includes(target.slice(0, 80)), problem.detail);
    assert.match(problem.detail, /characters\)/);
  });

  it('names each bad field with a sentence, not in the validator wording', async () => {
    const user = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v3/organizations/acme/users',
      headers: { authorization: auth, 'content-type': 'application/json' },
      payload: { id: 'bad id!', email: 'no-at-sign', firstname: 'a'.repeat(300), external: 'yes', extra: 1 },
    });
    assert.equal(user.statusCode, 400);
    assert.deepEqual(user.json().errors, [
      { parameter: 'extra', message: 'is not a field this request takes' },
      { parameter: 'id', message: 'must be 1 to 64 letters, digits, ".", "_" or "-"' },
      { parameter: 'firstname', message: 'must be at most 255 characters long' },
      { parameter: 'email', message: 'must be an email address (name@domain, without spaces)' },
      { parameter: 'external', message: 'must be true or false' },
    ]);
    const upload = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v3/organizations/acme/rooms/board/documents',
      headers: { authorization: auth, 'content-type': 'application/json', 'idempotency-key': 'has spaces' },
      payload: { payload: 'JVBERi0=' },
    });
    assert.deepEqual(upload.json().errors, [{ parameter: 'idempotency-key', message: 'must be printable ASCII characters, without spaces' }]);
  });

  it('echoes a well-formed request id and replaces a hostile one', async () => {
    const given = await t.app.inject({ url: '/livez', headers: { 'x-request-id': 'abc-123' } });
    assert.equal(given.headers['x-request-id'], 'abc-123');
    const hostile = await t.app.inject({ url: '/livez', headers: { 'x-request-id': 'a b\u00e9<script>' } });
    assert.match(String(hostile.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const none = await t.app.inject({ url: '/livez' });
    assert.match(String(none.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  it('answers a database failure with a 500 that carries no internals', async () => {
    await t.sql(sql`ALTER TABLE rooms RENAME TO rooms_gone`);
    try {
      const response = await t.app.inject({ url: LOOKUP('acme', 'board'), headers: { authorization: auth } });
      assert.equal(response.statusCode, 500);
      const body = response.json();
      assert.equal(body.code, 'internal-error');
      const { instance, ...rest } = body;
      assert.equal(instance, LOOKUP('acme', 'board'));
      assert.doesNotMatch(JSON.stringify(rest), /rooms|table|sqlite|select|\.ts|stack/i);
    } finally {
      await t.sql(sql`ALTER TABLE rooms_gone RENAME TO rooms`);
    }
  });

  it('documents every problem code in docs/api.md', () => {
    const readme = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const missing = Object.entries(PROBLEMS)
      .filter(([code, { status }]) => !readme.includes(`| \`${code}\` | ${status} |`))
      .map(([code]) => code);
    assert.deepEqual(missing, [], 'the error table of docs/api.md lacks these codes');
  });
});
