/**
 * Every phase of a request is bounded (issue 24): headers, body (a minimum rate), the handler.
 * Each attack is played over a real socket against the real server with short limits.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { CapturedLog } from '../helpers/log.ts';
import { hostilePdfs, topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const UPLOAD = '/admin/api/v3/organizations/acme/rooms/board/documents';
const AUTH = basic('acme-admin', ACME_PASSWORD);

interface Answer {
  status: number;
  headers: string;
  body: string;
  /** Whether the server closed the connection after answering. */
  closed: boolean;
}

/** Sends `head` (and any `body` bytes), then nothing more; resolves with what the server answers, once it closes. */
async function stall(port: number, head: string, body = ''): Promise<Answer> {
  const socket: Socket = connect({ port, host: '127.0.0.1' });
  await once(socket, 'connect');
  socket.write(head + body);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise<void>((resolve) => {
    socket.on('close', () => resolve());
    socket.on('error', () => resolve());
  });
  return parse(Buffer.concat(chunks).toString('utf8'), true);
}

/** Reads one whole response (its head and Content-Length bytes of body) from a connection that stays open. */
async function oneResponse(socket: Socket): Promise<string> {
  let received = Buffer.alloc(0);
  for await (const chunk of socket) {
    received = Buffer.concat([received, chunk as Buffer]);
    const text = received.toString('utf8');
    const split = text.indexOf('\r\n\r\n');
    const length = /content-length: (\d+)/i.exec(text.slice(0, split))?.[1];
    if (split !== -1 && length !== undefined && received.length >= Buffer.byteLength(text.slice(0, split)) + 4 + Number(length)) return text;
  }
  return received.toString('utf8');
}

function parse(text: string, closed: boolean): Answer {
  const split = text.indexOf('\r\n\r\n');
  const headers = split === -1 ? text : text.slice(0, split);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body: split === -1 ? '' : text.slice(split + 4), closed };
}

function uploadHead(length: number): string {
  return `POST ${UPLOAD} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
}

function problemOf(answer: Answer): { status: number; code: string; detail: string } {
  assert.match(answer.headers, /content-type: application\/problem\+json/i);
  // A chunked body or a plain one: the JSON object is all that matters here.
  const json = /\{.*\}/s.exec(answer.body)?.[0];
  assert.ok(json !== undefined, answer.body);
  return JSON.parse(json) as { status: number; code: string; detail: string };
}

describe('request deadlines', () => {
  let t: TestApp;
  let port: number;
  const log = new CapturedLog();
  const events = (name: string) => log.events(name);
  before(async () => {
    t = await startTestApp(
      {
        SIGNROOM_HEADERS_TIMEOUT_MS: '500',
        SIGNROOM_BODY_TIMEOUT_MS: '500',
        SIGNROOM_BODY_MIN_BYTES_PER_SECOND: '4096',
        SIGNROOM_HANDLER_TIMEOUT_MS: '300',
        SIGNROOM_LOG_LEVEL: 'warn',
      },
      undefined,
      log.stream,
    );
    await t.importDirectory(DIRECTORY);
    // A render process already warm, as after a first upload: the 300 ms limit is for a slow render, not a process's start.
    writeFileSync(path.join(t.dataDir, 'warm-up.pdf'), topHalfBlackPdf());
    assert.equal((await t.app.renderer.render('application/pdf', path.join(t.dataDir, 'warm-up.pdf'), 200)).kind, 'thumbnail');
    // And warm for a PDF it cannot open (the body of the minimum-rate test below), whose fallback renderer loads on first use.
    writeFileSync(path.join(t.dataDir, 'unreadable.pdf'), '%PDF-1.4\n%%EOF\n');
    assert.equal((await t.app.renderer.render('application/pdf', path.join(t.dataDir, 'unreadable.pdf'), 200)).kind, 'unreadable');
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(async () => {
    await t.close();
  });

  it('answers headers that never end with 408 problem details and closes the connection', async () => {
    const answer = await stall(port, 'GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    assert.equal(answer.status, 408);
    assert.equal(problemOf(answer).code, 'request-timeout');
    assert.ok(answer.closed);
  });

  it('answers a body that stops arriving with 408 problem details, closes the connection and frees what was held', async () => {
    gc();
    const before = process.memoryUsage().arrayBuffers;
    // Five uploads that each declare 20 MB and then send 100 bytes: the server holds a buffer for each until they end.
    const answers = await Promise.all(Array.from({ length: 5 }, () => stall(port, uploadHead(20_000_000), '{"payload":"' + 'A'.repeat(88))));
    for (const answer of answers) {
      assert.equal(answer.status, 408, answer.headers);
      const problem = problemOf(answer);
      assert.equal(problem.code, 'request-timeout');
      assert.match(problem.detail, /slower than 4096 bytes per second/);
      assert.match(answer.headers, /connection: close/i);
      assert.ok(answer.closed);
    }
    // V8 frees array buffers' memory after a collection, in the background: look a few times.
    let held = Infinity;
    for (let attempt = 0; attempt < 20 && held >= 20_000_000; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      gc();
      held = process.memoryUsage().arrayBuffers - before;
    }
    assert.ok(held < 20_000_000, `still held after the 408s: ${held} bytes`);
    const listed = await t.app.inject({ url: UPLOAD, headers: { authorization: AUTH } });
    assert.equal(listed.json().totalElements, 0, 'nothing stored');
    assert.equal(events('request.body-too-slow').length, 5, 'one log event per stalled upload');
  });

  it('answers a body that trickles in below the minimum rate with 408', async () => {
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    socket.write(uploadHead(100_000) + '{"payload":"');
    // 100 bytes every 100 ms: 1,000 bytes a second, below the 4,096 asked for.
    const trickle = setInterval(() => socket.write('A'.repeat(100)), 100);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise<void>((resolve) => {
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
    });
    clearInterval(trickle);
    const answer = parse(Buffer.concat(chunks).toString('utf8'), true);
    assert.equal(answer.status, 408);
    assert.equal(problemOf(answer).code, 'request-timeout');
  });

  it('lets a body that arrives at the minimum rate through', async () => {
    const pdf = Buffer.from(JSON.stringify({ payload: Buffer.from('%PDF-1.4\n%%EOF\n').toString('base64') }));
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    socket.write(uploadHead(pdf.length));
    // Half now, half after 300 ms: slow, but above the rate within each window.
    socket.write(pdf.subarray(0, 20));
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.write(pdf.subarray(20));
    const answer = parse(await oneResponse(socket), false);
    socket.destroy();
    // The body was read whole: the answer is about the document (it cannot be opened), not the time.
    assert.equal(answer.status, 422, answer.headers);
    assert.equal(problemOf(answer).code, 'document-unreadable');
  });

  it('answers 503 with Retry-After when the handler takes longer than its limit', async () => {
    const decompressionBomb = (await hostilePdfs())['decompressionBomb']!;
    const response = await fetch(`http://127.0.0.1:${port}${UPLOAD}`, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({ payload: decompressionBomb.toString('base64') }),
    });
    assert.equal(response.status, 503);
    assert.equal(response.headers.get('retry-after'), '5');
    const problem = (await response.json()) as { code: string; detail: string };
    assert.equal(problem.code, 'service-unavailable');
    assert.match(problem.detail, /did not finish this request within 0.3 s/);
    assert.equal(events('request.handler-too-slow').length, 1);
  });
});
