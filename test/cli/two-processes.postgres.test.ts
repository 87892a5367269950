import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort, runCli, startServer } from '../helpers/cli.ts';
import { freshDatabase, type TestDatabase } from '../helpers/databases.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, freshDataDir, LOOKUP } from '../helpers/test-app.ts';

const DOCUMENTS = '/admin/api/v3/organizations/acme/rooms/board/documents';

/**
 * Two `bin/signroom serve` processes on one PostgreSQL database, each with a
 * data directory of its own (so nothing is shared through local files), must
 * behave as one service.
 */
describe('two signroom processes on one PostgreSQL', () => {
  let database: TestDatabase;
  let servers: Awaited<ReturnType<typeof startServer>>[] = [];
  const env = () => database.env;
  const [a, b] = [() => servers[0]!, () => servers[1]!];

  before(async () => {
    database = await freshDatabase('postgres');
    const dir = freshDataDir();
    const file = path.join(dir, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    const imported = await runCli(['import', file], { ...env(), SIGNROOM_DATA_DIR: dir });
    assert.equal(imported.code, 0, imported.stderr);
    const policy = { SIGNROOM_LOGIN_MAX_FAILURES: '3', SIGNROOM_LOGIN_LOCK_SECONDS: '60', SIGNROOM_LOG_LEVEL: 'warn' };
    servers = await Promise.all(
      [0, 1].map(async () => startServer({ ...env(), ...policy, SIGNROOM_DATA_DIR: freshDataDir(), PORT: String(await freePort()) })),
    );
  });
  after(async () => {
    for (const server of servers) {
      server.child.kill('SIGTERM');
      if (server.child.exitCode === null) await once(server.child, 'exit');
    }
    await database.drop();
  });

  it('serves a document uploaded through one from the other, byte for byte', async () => {
    const pdf = topHalfBlackPdf();
    const auth = { authorization: basic('root', 'root-password') };
    const created = await fetch(`${a().url}${DOCUMENTS}`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shared.pdf', payload: pdf.toString('base64') }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const { id } = (await created.json()) as { id: string };

    const content = await fetch(`${b().url}${DOCUMENTS}/${id}/content`, { headers: auth });
    assert.equal(content.status, 200);
    assert.equal(content.headers.get('content-type'), 'application/pdf');
    assert.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);
    const listed = (await (await fetch(`${b().url}${DOCUMENTS}`, { headers: auth })).json()) as { content: { id: string; name: string }[] };
    assert.deepEqual(
      listed.content.map((document) => [document.id, document.name]),
      [[id, 'shared.pdf']],
    );

    const deleted = await fetch(`${b().url}${DOCUMENTS}/${id}`, { method: 'DELETE', headers: auth });
    assert.equal(deleted.status, 204);
    assert.equal((await fetch(`${a().url}${DOCUMENTS}/${id}/content`, { headers: auth })).status, 404);
  });

  it('answers one Idempotency-Key sent to both at once with one document', async () => {
    const auth = { authorization: basic('root', 'root-password') };
    const before = ((await (await fetch(`${a().url}${DOCUMENTS}?size=1`, { headers: auth })).json()) as { totalElements: number }).totalElements;
    const keys = ['race-1', 'race-2', 'race-3', 'race-4', 'race-5'];
    for (const key of keys) {
      const body = JSON.stringify({ name: key, payload: topHalfBlackPdf().toString('base64') });
      const responses = await Promise.all(
        [a(), b()].map((server) =>
          fetch(`${server.url}${DOCUMENTS}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': key }, body }),
        ),
      );
      const answers = await Promise.all(
        responses.map(async (response) => ({ status: response.status, body: (await response.json()) as { id: string; thumbnail: string } })),
      );
      assert.deepEqual(
        answers.map((answer) => answer.status),
        [201, 201],
        JSON.stringify(answers),
      );
      assert.equal(answers[0]!.body.id, answers[1]!.body.id, `${key}: both answers name the same document`);
      assert.equal(answers[0]!.body.thumbnail, answers[1]!.body.thumbnail);
    }
    const after = (await (await fetch(`${b().url}${DOCUMENTS}?size=100`, { headers: auth })).json()) as { totalElements: number; content: { name: string }[] };
    assert.equal(after.totalElements, before + keys.length);
    assert.deepEqual(
      after.content
        .map((document) => document.name)
        .filter((name) => name.startsWith('race-'))
        .sort(),
      keys,
    );
  });

  it('sees an import made while both serve, with exact totals on both', async () => {
    const auth = { authorization: basic('root', 'root-password') };
    const total = async (server: { url: string }) => {
      const response = await fetch(`${server.url}${LOOKUP('acme', 'board')}?size=1`, { headers: auth });
      assert.equal(response.status, 200);
      return ((await response.json()) as { totalElements: number }).totalElements;
    };
    const before = await total(a());
    assert.equal(await total(b()), before);

    const dir = freshDataDir();
    const file = path.join(dir, 'more.json');
    const acme = DIRECTORY.organizations[0]!;
    const extra = { id: 'newcomer', firstname: 'Nina', lastname: 'Neu', email: 'nina.neu@acme.example' };
    writeFileSync(file, JSON.stringify({ organizations: [{ id: acme.id, name: acme.name, users: [extra] }] }));
    const imported = await runCli(['import', file], { ...env(), SIGNROOM_DATA_DIR: dir });
    assert.equal(imported.code, 0, imported.stderr);

    assert.equal(await total(a()), before + 1);
    assert.equal(await total(b()), before + 1);
  });

  it('stops a revoked credential on both processes at once', async () => {
    const password = 'temporary-Passw0rd';
    const set = await runCli(['credential', 'set', 'temp', 'acme'], { ...env(), SIGNROOM_DATA_DIR: freshDataDir(), SIGNROOM_PASSWORD: password });
    assert.equal(set.code, 0, set.stderr);
    const status = async (server: { url: string }) =>
      (await fetch(`${server.url}${LOOKUP('acme', 'board')}?size=1`, { headers: { authorization: basic('temp', password) } })).status;
    // Both verify (and cache) the password first.
    assert.deepEqual([await status(a()), await status(b())], [200, 200]);

    const revoked = await runCli(['credential', 'revoke', 'temp'], { ...env(), SIGNROOM_DATA_DIR: freshDataDir() });
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.deepEqual([await status(a()), await status(b())], [401, 401]);
  });

  it('counts failed logins across both processes', async () => {
    const wrong = { authorization: basic('acme-admin', 'wrong-password') };
    const url = (server: { url: string }) => `${server.url}${LOOKUP('acme', 'board')}?size=1`;
    // Three failures (the limit), spread over the two processes...
    assert.equal((await fetch(url(a()), { headers: wrong })).status, 401);
    assert.equal((await fetch(url(b()), { headers: wrong })).status, 401);
    assert.equal((await fetch(url(a()), { headers: wrong })).status, 401);
    // ...lock the username on both, even for the right password.
    for (const server of [b(), a()]) {
      const locked = await fetch(url(server), { headers: { authorization: basic('acme-admin', DIRECTORY.credentials[0]!.password) } });
      assert.equal(locked.status, 429);
      assert.ok(Number(locked.headers.get('retry-after')) > 0);
      assert.equal(((await locked.json()) as { code: string }).code, 'too-many-requests');
    }
  });
});
