import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { cliWorkspace, freePort, runCli, startServer, type CliWorkspace } from '../helpers/cli.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { freshDataDir, LOOKUP } from '../helpers/test-app.ts';

const TOKEN = /^srt_[A-Za-z0-9_-]{43}$/;

/**
 * API tokens (contract section 10): created, listed and revoked with bin/signroom, only a hash kept,
 * acting for one organization on /admin/api/** as `token:<id>`, and revoked at once on every server
 * of one database.
 */
describe(`API tokens on ${TEST_DIALECT}`, () => {
  let workspace: CliWorkspace;
  let servers: Awaited<ReturnType<typeof startServer>>[] = [];
  const env = () => workspace.env;
  const events = (action: string) =>
    workspace.sql<{ actor: string; target_id: string; org_id: string | null; details: string }>(
      sql`SELECT actor, target_id, org_id, details FROM audit_events WHERE action = ${action} ORDER BY seq`,
    );
  const call = (server: number, token: string, route: string, init: RequestInit = {}) =>
    fetch(`${servers[server]!.url}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string> | undefined) },
    });

  before(async () => {
    workspace = await cliWorkspace();
    const file = path.join(workspace.dataDir, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    assert.equal((await runCli(['import', file], env())).code, 0);
    const serverEnv = { ...env(), SIGNROOM_LOG_LEVEL: 'warn' };
    servers = await Promise.all(
      [0, 1].map(async () =>
        startServer({ ...serverEnv, SIGNROOM_DATA_DIR: TEST_DIALECT === 'sqlite' ? workspace.dataDir : freshDataDir(), PORT: String(await freePort()) }),
      ),
    );
  });
  after(async () => {
    for (const server of servers) {
      server.child.kill('SIGTERM');
      await once(server.child, 'exit');
    }
    await workspace.close();
  });

  it('creates a token shown once on its first line, keeping only its SHA-256, and audits it', async () => {
    const created = await runCli(['token', 'create', 'acme', '--name', 'Entra ID'], env());
    assert.equal(created.code, 0, created.stderr);
    const token = created.stdout.split('\n')[0]!;
    assert.match(token, TOKEN);
    const rows = await workspace.sql<Record<string, unknown>>(sql`SELECT * FROM api_tokens`);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!['secret_hash'], createHash('sha256').update(token).digest('hex'));
    assert.ok(!JSON.stringify(rows).includes(token.slice(4)), 'the secret is not stored');
    const [event] = await events('token.created');
    assert.deepEqual(
      { ...event, details: JSON.parse(event!.details) },
      { actor: 'cli', target_id: rows[0]!['id'], org_id: 'acme', details: { name: 'Entra ID' } },
    );
  });

  it('prints the token with its details as JSON, and lists tokens without their secrets', async () => {
    const created = await runCli(['token', 'create', 'other', '--json', '--as', 'ops-alice'], env());
    assert.equal(created.code, 0, created.stderr);
    const token = JSON.parse(created.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(token).sort(), ['createdAt', 'id', 'lastUsedAt', 'name', 'organizationId', 'token']);
    assert.match(String(token['token']), TOKEN);
    assert.equal(token['organizationId'], 'other');
    assert.equal(token['lastUsedAt'], null);
    const all = JSON.parse((await runCli(['token', 'list', '--json'], env())).stdout) as Record<string, unknown>[];
    assert.deepEqual(
      all.map((listed) => [listed['organizationId'], listed['name']]),
      [
        ['acme', 'Entra ID'],
        ['other', ''],
      ],
    );
    for (const listed of all) assert.deepEqual(Object.keys(listed).sort(), ['createdAt', 'id', 'lastUsedAt', 'name', 'organizationId']);
    const unknown = await runCli(['token', 'list', 'nosuch'], env());
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no organization "nosuch"/);
    const ofOther = JSON.parse((await runCli(['token', 'list', 'other', '--json'], env())).stdout) as Record<string, unknown>[];
    assert.deepEqual(
      ofOther.map((listed) => listed['id']),
      [token['id']],
    );
    assert.equal((await events('token.created')).at(-1)?.actor, 'ops-alice');
  });

  it('refuses an unknown organization (exit 1) and a bad name (exit 2), storing and recording nothing', async () => {
    const before = (await workspace.sql<{ n: number }>(sql`SELECT count(*) AS n FROM api_tokens`))[0]!.n;
    const unknown = await runCli(['token', 'create', 'nope'], env());
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no organization "nope"/);
    assert.equal((await runCli(['token', 'create', 'acme', '--name', 'bad\u0007name'], env())).code, 2);
    assert.equal((await runCli(['token', 'create', 'acme', '--name', 'x'.repeat(201)], env())).code, 2);
    assert.equal((await runCli(['token', 'create'], env())).code, 2);
    // --name without its value: the usage, not a stack trace.
    const noName = await runCli(['token', 'create', 'acme', '--name'], env());
    assert.equal(noName.code, 2);
    assert.match(noName.stderr, /^signroom: .*--name.*\n\nUsage of signroom token:/s);
    assert.equal(Number((await workspace.sql<{ n: number }>(sql`SELECT count(*) AS n FROM api_tokens`))[0]!.n), Number(before));
    assert.equal((await events('token.created')).length, 2);
  });

  it('acts for its one organization as token:<id>, on every server, and keeps when it was last used', async () => {
    const created = JSON.parse((await runCli(['token', 'create', 'acme', '--name', 'writer', '--json'], env())).stdout) as { token: string; id: string };
    for (const server of [0, 1]) {
      const response = await call(server, created.token, `${LOOKUP('acme', 'board')}?size=5`);
      assert.equal(response.status, 200, await response.clone().text());
      assert.equal(((await response.json()) as { totalElements: number }).totalElements, 4);
    }
    // The scheme ignores case (RFC 6750, RFC 9110).
    assert.equal((await fetch(`${servers[0]!.url}${LOOKUP('acme', 'board')}`, { headers: { authorization: `bearer ${created.token}` } })).status, 200);
    const elsewhere = await call(0, created.token, LOOKUP('other', 'lobby'));
    assert.equal(elsewhere.status, 403);
    assert.equal(((await elsewhere.json()) as { code: string }).code, 'forbidden');
    const newOrganization = await call(0, created.token, '/admin/api/v3/organizations', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'neworg', name: 'New' }),
    });
    assert.equal(newOrganization.status, 403, 'a token never acts beyond its organization');
    const added = await call(1, created.token, '/admin/api/v3/organizations/acme/users', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'tok1', email: 'tok1@acme.example' }),
    });
    assert.equal(added.status, 201, await added.clone().text());
    const [event] = (await events('user.created')).filter((recorded) => recorded.target_id === 'tok1');
    assert.equal(event?.actor, `token:${created.id}`);
    const listed = JSON.parse((await runCli(['token', 'list', 'acme', '--json'], env())).stdout) as { id: string; lastUsedAt: string | null }[];
    const used = listed.find((token) => token.id === created.id)?.lastUsedAt;
    assert.ok(used !== null && used !== undefined && Date.now() - Date.parse(used) < 60_000, `lastUsedAt: ${used}`);
  });

  it('answers 401 with the challenge for a token unknown, malformed or revoked: revoked at once on every server', async () => {
    const created = JSON.parse((await runCli(['token', 'create', 'acme', '--json'], env())).stdout) as { token: string; id: string };
    for (const server of [0, 1]) assert.equal((await call(server, created.token, LOOKUP('acme', 'board'))).status, 200);
    for (const bad of ['srt_short', `srt_${'A'.repeat(43)}`, created.token.slice(0, -1) + (created.token.endsWith('A') ? 'B' : 'A'), '']) {
      const response = await call(0, bad, LOOKUP('acme', 'board'));
      assert.equal(response.status, 401, bad);
      assert.equal(response.headers.get('www-authenticate'), 'Basic realm="signroom", charset="UTF-8"');
      assert.equal(response.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    }
    const revoked = await runCli(['token', 'revoke', created.id, '--as', 'ops-bob'], env());
    assert.equal(revoked.code, 0, revoked.stderr);
    for (const server of [0, 1]) {
      const response = await call(server, created.token, LOOKUP('acme', 'board'));
      assert.equal(response.status, 401);
      assert.equal(((await response.json()) as { detail: string }).detail, 'Unknown or revoked API token.');
    }
    const [event] = (await events('token.revoked')).filter((recorded) => recorded.target_id === created.id);
    assert.equal(event?.actor, 'ops-bob');
    assert.equal(event?.org_id, 'acme');
    const again = await runCli(['token', 'revoke', created.id], env());
    assert.equal(again.code, 1, 'an unknown id');
    assert.equal((await events('token.revoked')).length, 1, 'nothing recorded for it');
  });
});
