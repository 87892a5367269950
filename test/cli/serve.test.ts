import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
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
});
