import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

/** The console's files (contract section 11): served without auth, under a strict policy, cached by content. */
describe('console files', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('serves the page without auth, revalidated on every load, under a policy that allows no inline script and no other origin', async () => {
    const page = await t.app.inject({ url: '/console/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.equal(page.headers['cache-control'], 'no-cache');
    const policy = String(page.headers['content-security-policy']);
    assert.match(policy, /default-src 'none'/);
    assert.match(policy, /script-src 'self'(;|$)/);
    assert.match(policy, /frame-ancestors 'none'/);
    assert.doesNotMatch(policy, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.equal(page.headers['referrer-policy'], 'no-referrer');
    // Nothing inline, nothing from elsewhere: every script and stylesheet is a file of this server.
    assert.doesNotMatch(page.body, /<script(?![^>]*\bsrc="assets\/)|<style|\son[a-z]+=|https?:\/\//i);

    const redirect = await t.app.inject({ url: '/console' });
    assert.equal(redirect.statusCode, 301);
    assert.equal(redirect.headers.location, '/console/');
  });

  it('serves the hashed assets as immutable, and the script names no other origin', async () => {
    const page = await t.app.inject({ url: '/console/' });
    const assets = [...page.body.matchAll(/(?:src|href)="(assets\/[^"]+)"/g)].map((match) => match[1]!);
    assert.equal(assets.length, 2, page.body);
    for (const asset of assets) {
      const response = await t.app.inject({ url: `/console/${asset}` });
      assert.equal(response.statusCode, 200, asset);
      assert.equal(response.headers['cache-control'], 'public, max-age=31536000, immutable');
      assert.match(asset, /-[A-Z0-9]{8}\.(js|css)$/);
      // No fetch, import or font from another origin (URLs in comments of bundled libraries aside).
      assert.doesNotMatch(response.body, /(fetch|import)\(\s*["'`]https?:|url\(\s*["']?https?:/);
    }
  });

  it('answers an unknown console file with a 404 problem, and the API behind the console still needs the credential', async () => {
    const missing = await t.app.inject({ url: '/console/assets/nothing-here.js' });
    assert.equal(missing.statusCode, 404);
    assert.match(String(missing.headers['content-type']), /^application\/problem\+json/);
    const traversal = await t.app.inject({ url: '/console/..%2f..%2fpackage.json' });
    assert.ok([400, 403, 404].includes(traversal.statusCode), String(traversal.statusCode));
    assert.doesNotMatch(traversal.body, /"name": "signroom"/);
    const api = await t.app.inject({ url: '/admin/api/v3/organizations' });
    assert.equal(api.statusCode, 401);
  });

  it('writes no credential to the log: requests the console sends are logged without their Authorization header', async () => {
    const log = new PassThrough();
    let written = '';
    log.on('data', (chunk: Buffer) => (written += chunk.toString('utf8')));
    const logged = await startTestApp({ SIGNROOM_LOG_LEVEL: 'info' }, undefined, log);
    try {
      await logged.importDirectory(DIRECTORY);
      const authorization = basic('acme-admin', ACME_PASSWORD);
      for (const password of [ACME_PASSWORD, 'a wrong password']) {
        await logged.app.inject({ url: '/admin/api/v3/organizations', headers: { authorization: basic('acme-admin', password) } });
      }
      await logged.app.inject({ url: '/admin/api/v3/organizations/acme/rooms/board/signatories/lookup?searchQuery=anna', headers: { authorization } });
      assert.match(written, /"url":"\/admin\/api\/v3\/organizations"/, 'the requests are logged');
      for (const secret of [ACME_PASSWORD, 'a wrong password', authorization.slice('Basic '.length), 'authorization']) {
        assert.ok(!written.toLowerCase().includes(secret.toLowerCase()), `the log holds ${secret}`);
      }
    } finally {
      await logged.close();
    }
  });
});
