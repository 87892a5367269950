/**
 * Upload bodies share one memory budget (issue 24): an upload that would take more than is left is
 * answered 503 with Retry-After before its body is read, and the budget comes back once uploads end.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { imageBomb, makePdf } from '../helpers/pdf.ts';
import { uploadBodyLimit } from '../../src/domain/upload-body.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';
import { waitUntil } from '../helpers/wait.ts';

const UPLOAD = '/admin/api/v3/organizations/acme/rooms/board/documents';
const AUTH = basic('acme-admin', ACME_PASSWORD);

describe('upload memory budget', () => {
  let t: TestApp;
  let port: number;
  before(async () => {
    // Documents of at most 100 KB: a body limit of about 330 KB, and 1 MiB for all bodies at once.
    t = await startTestApp({ SIGNROOM_MAX_DOCUMENT_BYTES: '100000', SIGNROOM_UPLOAD_MEMORY_MB: '1' });
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(async () => t.close());

  /** An upload that declares `length` bytes and sends only its start, held open. */
  async function held(length: number): Promise<Socket> {
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    socket.write(
      `POST ${UPLOAD} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n{"payload":"`,
    );
    return socket;
  }

  const post = (pdf: Buffer) =>
    fetch(`http://127.0.0.1:${port}${UPLOAD}`, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({ payload: pdf.toString('base64') }),
    });

  it('answers 503 with Retry-After when the bodies held would pass the budget, and stores nothing', async () => {
    // About 66 KB of PDF, 88 KB of body: more than the budget has left beside three bodies of 330 KB.
    const pdf = makePdf([{ width: 200, height: 200, content: '0 0 0 rg 0 0 1 1 re f\n'.repeat(3000) }]);
    const holding = await Promise.all([held(330_000), held(330_000), held(330_000)]);
    try {
      // Let the server take them in.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const refused = await post(pdf);
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get('retry-after'), '5');
      const problem = (await refused.json()) as { code: string; detail: string };
      assert.equal(problem.code, 'service-unavailable');
      assert.match(problem.detail, /as many uploads as its memory allows/);
      const listed = await t.app.inject({ url: UPLOAD, headers: { authorization: AUTH } });
      assert.equal(listed.json().totalElements, 0);
    } finally {
      for (const socket of holding) socket.destroy();
    }
    // Once those uploads are gone, their share of the budget is back.
    let stored: Response | undefined;
    for (let attempt = 0; attempt < 50 && stored?.status !== 201; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      stored = await post(pdf);
    }
    assert.equal(stored?.status, 201);
  });
});

describe('upload memory budget and clients that go away', () => {
  let t: TestApp;
  let port: number;
  before(async () => {
    // 67 MiB: one largest upload body (about 66.7 MiB for 25 MiB documents) and a little more.
    t = await startTestApp({ SIGNROOM_UPLOAD_MEMORY_MB: '67' });
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(async () => t.close());

  /** Declares the largest body, sends its start and waits up to a second: the answer, or '' while the server reads on. */
  async function largestUpload(): Promise<string> {
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    socket.write(
      `POST ${UPLOAD} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${uploadBodyLimit(t.config.maxDocumentBytes)}\r\n\r\n{"payload":"`,
    );
    const answer = await new Promise<string>((resolve) => {
      let data = '';
      socket.on('data', (chunk) => (data += String(chunk)));
      socket.on('close', () => resolve(data));
      setTimeout(() => resolve(data), 1000);
    });
    socket.destroy();
    return answer;
  }

  it('holds nothing for a client that leaves while its credential is checked', async () => {
    // The first request of the credential computes its hash: the client is gone before it ends.
    const leaving = connect({ port, host: '127.0.0.1' });
    await once(leaving, 'connect');
    leaving.write(
      `POST ${UPLOAD} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${uploadBodyLimit(t.config.maxDocumentBytes)}\r\n\r\n{"payload":"`,
    );
    leaving.destroy();
    await once(leaving, 'close');
    const hashes = t.app.authenticator.hashesComputed;
    await waitUntil('the credential to be checked', () => t.app.authenticator.hashesComputed !== hashes);
    // Had the gone upload kept its share, the largest body would not fit beside it (503 at once).
    assert.equal(await largestUpload(), '');
  });

  it('keeps counting an upload whose client went away until its work has ended', async () => {
    // The credential checked once (its hash kept), so the upload below is not held up by it.
    assert.equal((await t.app.inject({ url: UPLOAD, headers: { authorization: AUTH } })).statusCode, 200);
    // 531 KB of body whose render takes seconds; the client sends it whole and leaves.
    const body = JSON.stringify({ payload: imageBomb().toString('base64') });
    const leaving = connect({ port, host: '127.0.0.1' });
    await once(leaving, 'connect');
    leaving.write(
      `POST ${UPLOAD} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // Once its render has begun (its credential checked, its body read), the client leaves.
    await waitUntil('the upload to reach its render', () => t.app.renderer.waiting + t.app.renderer.processes.busy > 0);
    leaving.destroy();
    await once(leaving, 'close');
    // The largest body alone fits the budget, but not beside the upload still being rendered.
    const answer = await largestUpload();
    assert.match(answer, /^HTTP\/1\.1 503 /);
  });
});
