import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connect } from 'node:net';
import { sql } from 'kysely';
import { after, before, describe, it } from 'node:test';
import { cliWorkspace, freePort, runCli, startServer, type CliWorkspace } from '../helpers/cli.ts';
import { basic } from '../helpers/test-app.ts';

describe('bin/signroom serve and configuration', () => {
  let workspace: CliWorkspace;
  before(async () => {
    workspace = await cliWorkspace();
  });
  after(() => workspace.close());

  for (const [variable, value] of [
    ['PORT', 'eighty'],
    ['SIGNROOM_MAX_PAGE_SIZE', '0'],
    ['SIGNROOM_LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://localhost/x'],
    ['SIGNROOM_RENDER_MAX_WORKERS', '1'],
    ['SIGNROOM_SQLITE_MMAP_MB', 'lots'],
  ] as const) {
    it(`refuses a bad ${variable} naming it`, async () => {
      const result = await runCli(['migrate'], { ...workspace.env, [variable]: value });
      assert.equal(result.code, 2);
      assert.match(result.stderr, new RegExp(`configuration error: ${variable}: `));
    });
  }

  it('loads the demo and finishes in-flight requests on SIGTERM', async () => {
    const demo = await runCli(['demo'], workspace.env);
    assert.equal(demo.code, 0, demo.stderr);
    assert.match(demo.stdout, /demo credential: demo \/ demo-password/);

    const port = await freePort();
    const server = await startServer({ ...workspace.env, PORT: String(port) });
    // A write whose body is half sent when SIGTERM arrives: in flight however slow the machine
    // (its headers read long before), it ends once the rest of its body comes.
    const body = JSON.stringify({ id: 'in-flight', firstname: 'Ines', lastname: 'Flight', email: 'in.flight@demo.example' });
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.write(
      `POST /admin/api/v3/organizations/demo/users HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basic('demo', 'demo-password')}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.write(body.slice(10));
    await once(socket, 'close');
    const [head = '', json = ''] = answer.split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 201 /, answer);
    // A keep-alive client must not hold the stopping server open.
    assert.match(head, /\r\nconnection: close\r\n/i);
    assert.equal((JSON.parse(json) as { id: string }).id, 'in-flight');
    const [code] = await once(server.child, 'exit');
    assert.equal(code, 0, server.output());
    const logLines = server
      .output()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { reqId?: string; msg: string });
    assert.ok(logLines.some((line) => line.msg === 'request completed' && typeof line.reqId === 'string'));
    assert.ok(logLines.some((line) => /shutting down/.test(line.msg)));
  });

  it('exits with a clear message when the port is taken', async () => {
    const port = await freePort();
    const { createServer } = await import('node:net');
    const squatter = createServer().listen(port, '127.0.0.1');
    await once(squatter, 'listening');
    try {
      const result = await runCli(['serve'], { ...workspace.env, PORT: String(port) });
      assert.equal(result.code, 1);
      assert.match(result.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use`));
      assert.doesNotMatch(result.stderr, /at .*\.ts:\d+/, 'no stack trace');
    } finally {
      squatter.close();
    }
  });

  it('changes nothing with --demo when the port is taken: the demo is loaded only once it can listen', async () => {
    // A member added after the demo is what loading it again would undo.
    for (const args of [
      ['demo'],
      ['user', 'add', 'demo', '--id', 'keep-me', '--email', 'keep.me@demo.example'],
      ['room', 'add-member', 'demo', 'board', 'keep-me'],
    ]) {
      const result = await runCli(args, workspace.env);
      assert.equal(result.code, 0, result.stderr);
    }
    const port = await freePort();
    const { createServer } = await import('node:net');
    const squatter = createServer().listen(port, '127.0.0.1');
    await once(squatter, 'listening');
    try {
      const result = await runCli(['serve', '--demo'], { ...workspace.env, PORT: String(port) });
      assert.equal(result.code, 1);
      assert.match(result.stderr, /the port is already in use/);
      assert.doesNotMatch(result.stdout, /imported|demo credential/);
    } finally {
      squatter.close();
    }
    const members = await workspace.sql<{ user_id: string }>(
      sql`select user_id from room_members where org_id = 'demo' and room_id = 'board' and user_id = 'keep-me'`,
    );
    assert.equal(members.length, 1, 'the member added after the demo stays');
  });

  it('says so when a host name does not resolve', async () => {
    const result = await runCli(['serve'], { ...workspace.env, HOST: 'no-such-host.invalid', PORT: String(await freePort()) });
    assert.equal(result.code, 1);
    // ENOTFOUND, or EAI_AGAIN where no name server answers.
    assert.match(result.stderr, /cannot listen on no-such-host\.invalid:\d+: (no such host \(set HOST|the host name could not be looked up now)/);
  });
});

describe('bin/signroom on a new data directory', () => {
  let workspace: CliWorkspace;
  before(async () => {
    workspace = await cliWorkspace();
  });
  after(() => workspace.close());

  it('warns at the start of a server that nobody can sign in yet, and says how to', async () => {
    const server = await startServer({ ...workspace.env, PORT: String(await freePort()) });
    try {
      for (const began = performance.now(); !/no credential or API token yet/.test(server.output()) && performance.now() - began < 10_000;)
        await new Promise((resolve) => setTimeout(resolve, 50));
      assert.match(server.output(), /no credential or API token yet, so every request is refused: create one with `bin\/signroom credential set NAME '\*'`/);
    } finally {
      server.child.kill('SIGTERM');
      await once(server.child, 'exit');
    }
  });

  it('says when a command finds no SQLite database and makes a new, empty one, and only then', async () => {
    const dataDir = `${workspace.dataDir}-elsewhere`;
    const env = { ...workspace.env, SIGNROOM_DATA_DIR: dataDir };
    try {
      const first = await runCli(['token', 'list'], env);
      assert.equal(first.code, 0, first.stderr);
      // On PostgreSQL the database is the operator's (DATABASE_URL): nothing to say.
      if (workspace.env['DATABASE_URL'] === undefined)
        assert.match(first.stderr, /^signroom: no database at .*-elsewhere\/signroom\.sqlite: making a new, empty one \(set SIGNROOM_DATA_DIR/);
      else assert.equal(first.stderr, '');
      const again = await runCli(['token', 'list'], env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(again.stderr, '');
      // A bad command line makes nothing, and says nothing of a database.
      rmSync(dataDir, { recursive: true, force: true });
      const bad = await runCli(['token', 'frob'], env);
      assert.equal(bad.code, 2);
      assert.doesNotMatch(bad.stderr, /no database at/);
      // An import is how a database begins: no note.
      const file = path.join(workspace.dataDir, 'one-org.json');
      writeFileSync(file, JSON.stringify({ organizations: [{ id: 'fresh', name: 'Fresh' }] }));
      const imported = await runCli(['import', file], env);
      assert.equal(imported.code, 0, imported.stderr);
      assert.doesNotMatch(imported.stderr, /no database at/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
