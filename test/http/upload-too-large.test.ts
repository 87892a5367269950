import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { uploadBodyLimit } from '../../src/domain/upload-body.ts';
import { LINGER_IDLE_MS } from '../../src/http/lingering-close.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { solidImage } from '../helpers/images.ts';
import { waitUntil } from '../helpers/wait.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const LIMIT = 100_000;
const BODY_LIMIT = uploadBodyLimit(LIMIT);
const AUTH = basic('acme-admin', ACME_PASSWORD);
const ATTEMPTS = 10;

/** An upload body whose payload decodes to `bytes` bytes, as a client would send it. */
function uploadBody(bytes: number): string {
  return JSON.stringify({ payload: Buffer.alloc(bytes, 0x25).toString('base64') });
}

/** An upload body of exactly `length` bytes (base64 text in the payload). */
function bodyOfLength(length: number): string {
  const frame = '{"payload":""}';
  return `{"payload":"${'JSUl'.repeat(Math.ceil(length / 4)).slice(0, length - frame.length)}"}`;
}

/**
 * Two ways to be too large. Over the decoded limit but within the body limit,
 * the body is read whole and refused after decoding; over the body limit it is
 * refused from its Content-Length, before it is read whole, while the client
 * is still sending it: the case the contract's "reset or broken pipe" is about.
 */
const CASES = [
  { name: `a payload decoding to 2× the document limit (${LIMIT * 2} bytes)`, body: () => uploadBody(LIMIT * 2) },
  { name: `a payload decoding to 10× the document limit (${LIMIT * 10} bytes)`, body: () => uploadBody(LIMIT * 10) },
  { name: `a body of 2× the body limit (${BODY_LIMIT * 2} bytes)`, body: () => bodyOfLength(BODY_LIMIT * 2) },
  { name: `a body of 10× the body limit (${BODY_LIMIT * 10} bytes)`, body: () => bodyOfLength(BODY_LIMIT * 10) },
];

/**
 * POSTs the body in a file with Python requests, `attempts` times in a row
 * (a new connection each time, as requests.post makes), and prints one JSON
 * line per attempt: what was read, or the exception raised instead.
 */
const PYTHON_CLIENT = `
import json, sys
import requests
url, auth, file, attempts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(file, 'rb') as f:
    body = f.read()
for attempt in range(attempts):
    try:
        r = requests.post(url, data=body, headers={'authorization': auth, 'content-type': 'application/json'}, timeout=60)
        try:
            code = r.json().get('code')
        except ValueError:
            code = None
        print(json.dumps({'attempt': attempt, 'status': r.status_code, 'contentType': r.headers.get('content-type'), 'code': code}), flush=True)
    except Exception as e:
        print(json.dumps({'attempt': attempt, 'error': type(e).__name__ + ': ' + str(e)}), flush=True)
`;

const run = promisify(execFile);

/**
 * A client still sending an oversize body reads the 413 problem, not a reset or a broken pipe
 * (contract section 4): real clients over a real socket, ten times in a row each.
 */
describe('413 answers that clients read', () => {
  let t: TestApp;
  let url: string;
  let dir: string;
  before(async () => {
    t = await startTestApp({ SIGNROOM_MAX_DOCUMENT_BYTES: String(LIMIT) });
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/admin/api/v3/organizations/acme/rooms/board/documents`;
    dir = mkdtempSync(path.join(tmpdir(), 'signroom-413-'));
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [index, { name, body: makeBody }] of CASES.entries()) {
    it(`answers fetch (undici) with the problem, ten times in a row, for ${name}`, async () => {
      const body = makeBody();
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        const response = await fetch(url, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body }).catch(
          (error: Error) => assert.fail(`attempt ${attempt}: ${error.message} (${String((error.cause as Error | undefined)?.message)})`),
        );
        assert.equal(response.status, 413, `attempt ${attempt}`);
        assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/, `attempt ${attempt}`);
        assert.equal((await response.json()).code, 'payload-too-large', `attempt ${attempt}`);
      }
    });

    it(`answers curl with the problem, ten times in a row, for ${name}`, async () => {
      const file = path.join(dir, `body-${index}.json`);
      writeFileSync(file, makeBody());
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        // curl exits 0 once it has read a whole answer; a reset or broken pipe is exit 55 or 56.
        const { stdout } = await run('curl', [
          '--silent',
          '--show-error',
          '--write-out',
          '\n%{http_code}\n%{content_type}',
          '--header',
          `authorization: ${AUTH}`,
          '--header',
          'content-type: application/json',
          '--data-binary',
          `@${file}`,
          url,
        ]).catch((error: Error & { code?: number; stderr?: string }) => assert.fail(`attempt ${attempt}: curl exit ${error.code}: ${error.stderr}`));
        const lines = stdout.trimEnd().split('\n');
        assert.equal(lines.at(-2), '413', `attempt ${attempt}: ${stdout}`);
        assert.match(lines.at(-1) ?? '', /^application\/problem\+json/, `attempt ${attempt}: ${stdout}`);
        assert.equal(JSON.parse(lines.slice(0, -2).join('\n')).code, 'payload-too-large', `attempt ${attempt}`);
      }
    });

    it(`answers Python requests with the problem, ten times in a row, for ${name}`, async () => {
      // Never skipped: without Python requests the test fails and says how to get it.
      await run('python3', ['-c', 'import requests']).catch((error: Error & { stderr?: string }) =>
        assert.fail(
          `this test needs python3 and its requests package (Debian: apt-get install python3 python3-requests): ${error.stderr?.trim().split('\n').at(-1) || error.message}`,
        ),
      );
      const file = path.join(dir, `body-${index}.json`);
      writeFileSync(file, makeBody());
      const { stdout } = await run('python3', ['-c', PYTHON_CLIENT, url, AUTH, file, String(ATTEMPTS)]);
      const attempts = stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { attempt: number; status?: number; contentType?: string; code?: string; error?: string });
      assert.equal(attempts.length, ATTEMPTS, stdout);
      for (const answer of attempts) {
        assert.equal(answer.error, undefined, `attempt ${answer.attempt}: ${answer.error}`);
        assert.equal(answer.status, 413, `attempt ${answer.attempt}`);
        assert.match(answer.contentType ?? '', /^application\/problem\+json/, `attempt ${answer.attempt}`);
        assert.equal(answer.code, 'payload-too-large', `attempt ${answer.attempt}`);
      }
    });
  }

  it('reads the rest of an over-large body while it keeps coming, longer than the idle bound, and lets go once it stops', async () => {
    const { port, pathname } = new URL(url);
    // Half-open allowed: the client keeps its side open after the server's end, as a client still sending would.
    const accepted = once(t.app.server, 'connection') as Promise<[Socket]>;
    const socket = connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const [held] = await accepted;
    const released = once(held, 'close');
    let answer = '';
    let failed: Error | undefined;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', (error) => (failed = error));
    const declared = BODY_LIMIT * 10;
    const body = bodyOfLength(declared);
    socket.write(
      `POST ${pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    // The answer comes with the server's end of the connection, while the body has hardly begun.
    socket.write(body.slice(0, 16 * 1024));
    await once(socket, 'end');
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.match(answer, /"code":"payload-too-large"/);
    assert.equal(held.remotePort, socket.localPort);
    // More of the body, a little at a time, for longer than the idle bound: all of it read, none refused.
    let sent = 16 * 1024;
    for (const began = performance.now(); performance.now() - began < LINGER_IDLE_MS + 1_500; sent += 16 * 1024) {
      socket.write(body.slice(sent, sent + 16 * 1024));
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(failed, undefined, `the client met ${String(failed)} while still sending`);
    assert.equal(held.destroyed, false, 'still read while the body keeps coming');
    // Then nothing more: the server lets the connection go once none came for the idle bound.
    const stoppedSending = performance.now();
    await released;
    const seconds = (performance.now() - stoppedSending) / 1000;
    socket.destroy();
    assert.ok(seconds >= LINGER_IDLE_MS / 1000, `let go ${seconds.toFixed(1)} s after the last bytes`);
  });

  /** Sends a request's head with `Expect: 100-continue` and reads until the server's first answer line (and what follows it within 300 ms). */
  async function headFirst(headers: string, declared: number): Promise<{ socket: Socket; received: () => string }> {
    const { port, pathname } = new URL(url);
    const socket = connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => {});
    socket.write(
      `POST ${pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Content-Type: application/json\r\nContent-Length: ${declared}\r\nExpect: 100-continue\r\n\r\n`,
    );
    await waitUntil('a first answer line', () => received.includes('\r\n'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { socket, received: () => received };
  }

  it('answers Expect: 100-continue with the refusal, not 100, when the declared body is too large or the credential wrong', async () => {
    for (const [headers, status] of [
      [`Authorization: ${AUTH}\r\n`, 413],
      ['Authorization: Basic bm9ib2R5Om5vcGU=\r\n', 401],
    ] as const) {
      const { socket, received } = await headFirst(headers, BODY_LIMIT * 10);
      socket.destroy();
      assert.match(received(), new RegExp(`^HTTP/1\\.1 ${status} `), received());
      assert.doesNotMatch(received(), /100 Continue/);
    }
  });

  it('answers Expect: 100-continue with 100 when the body is wanted, and stores it', async () => {
    const png = await solidImage(40, 30, 'png');
    const body = JSON.stringify({ payload: png.toString('base64') });
    const { socket, received } = await headFirst(`Authorization: ${AUTH}\r\n`, Buffer.byteLength(body));
    assert.match(received(), /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    socket.write(body);
    await waitUntil('the final answer', () => /\r\n\r\n\{.*\}$/s.test(received().slice(25)));
    socket.destroy();
    assert.match(received(), /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
  });

  it('still stores a document within the limit afterwards', async () => {
    const png = await solidImage(40, 30, 'png');
    const response = await fetch(url, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({ payload: png.toString('base64') }),
    });
    assert.equal(response.status, 201, await response.clone().text());
  });
});
