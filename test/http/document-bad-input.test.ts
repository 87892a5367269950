import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import { sql } from 'kysely';
import { corpusDir } from '../helpers/corpus.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { inspectPng, pngHeaderOnly } from '../helpers/images.ts';
import { contentStreamBomb, topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const DOCS = (org = 'acme', room = 'board') => `/admin/api/v3/organizations/${org}/rooms/${room}/documents`;
const MAX_BYTES = 300_000;
const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
const auth = basic('acme-admin', ACME_PASSWORD);

interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  json(): any;
}

/** The PNG inside an upload answer's `thumbnail` data URI. */
function thumbnailOf(response: Answer): Buffer {
  const match = /^data:image\/png;base64,([A-Za-z0-9+/]+=*)$/.exec(response.json().thumbnail);
  assert.ok(match, `thumbnail is a PNG data URI: ${response.body.slice(0, 200)}`);
  return Buffer.from(match[1]!, 'base64');
}

/** Asserts the thumbnail shows topHalfBlackPdf's page: black top half, white below, the Helvetica "Hello" drawn. */
async function assertShowsTopHalfBlackPage(png: Buffer): Promise<void> {
  const image = await inspectPng(png);
  assert.deepEqual([image.width, image.height], [200, 283]);
  assert.ok(image.meanOf(0.05, 0.45) < 20, 'the top half is black');
  assert.ok(image.meanOf(0.55, 0.7) > 230, 'below it the page is white');
  assert.ok(image.meanOf(0.7, 0.8) < 250, 'the Helvetica text is drawn');
}

/** Asserts the PNG is the service's placeholder: an A4-shaped page of one light grey (236), not a rendering. */
async function assertPlaceholder(png: Buffer): Promise<void> {
  const image = await inspectPng(png);
  assert.deepEqual([image.width, image.height], [200, 283]);
  for (const [top, bottom] of [
    [0, 0.25],
    [0.25, 0.5],
    [0.5, 0.75],
    [0.75, 1],
  ] as const) {
    assert.equal(image.meanOf(top, bottom), 236, `rows ${top}–${bottom} are the placeholder's grey`);
  }
}

/** An upload through the app (inject), as JSON unless `body` is already a string. */
function upload(t: TestApp, body: unknown, headers: Record<string, string> = {}, url = DOCS()): Promise<Answer> {
  return t.app.inject({
    method: 'POST',
    url,
    headers: { authorization: auth, 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('bad uploads store nothing', () => {
  let t: TestApp;
  const good = topHalfBlackPdf();
  const goodBase64 = good.toString('base64');

  /**
   * Everything an upload could leave behind, on either database: the room's list
   * as the API shows it, the rows of `documents` and `idempotency_keys`, the
   * stored blobs (files on SQLite, the `blobs` table on PostgreSQL) and, on
   * PostgreSQL, their chunks, and every file under the data directory's
   * `blobs/` (blob files on SQLite; on both, the staging directory `blobs/tmp`).
   */
  async function stored() {
    const list = await t.app.inject({ url: `${DOCS()}?size=2000`, headers: { authorization: auth } });
    assert.equal(list.statusCode, 200, list.body);
    const page = list.json();
    return {
      listed: { totalElements: page.totalElements, ids: page.content.map((document: { id: string }) => document.id) },
      documents: await t.sql<{ id: string; sha256: string }>(sql`SELECT id, sha256 FROM documents ORDER BY id`),
      idempotencyKeys: await t.sql<{ key: string }>(sql`SELECT key FROM idempotency_keys ORDER BY key`),
      blobs: await t.storedBlobs(),
      blobChunks: TEST_DIALECT === 'postgres' ? Number((await t.sql<{ n: number | string }>(sql`SELECT count(*) AS n FROM blob_chunks`))[0]!.n) : 0,
      files: (readdirSync(path.join(t.dataDir, 'blobs'), { recursive: true }) as string[]).sort(),
    };
  }
  const staging = () => readdirSync(path.join(t.dataDir, 'blobs', 'tmp'));

  before(async () => {
    t = await startTestApp({ SIGNROOM_MAX_DOCUMENT_BYTES: String(MAX_BYTES) });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('sees what a good upload stores: listed, a row, a blob with its bytes, an idempotency record, and no staged file left', async () => {
    // The check the bad inputs below rely on, shown to notice a stored document.
    const before = await stored();
    const response = await upload(t, { payload: goodBase64, name: 'good.pdf' }, { 'idempotency-key': 'good-upload' });
    assert.equal(response.statusCode, 201, response.body);
    const after = await stored();
    const { id } = response.json();
    assert.deepEqual(after.listed.ids, [id, ...before.listed.ids]);
    assert.equal(after.listed.totalElements, before.listed.totalElements + 1);
    assert.deepEqual(after.documents.map((row) => row.id).sort(), [...before.documents.map((row) => row.id), id].sort());
    assert.equal(after.idempotencyKeys.length, before.idempotencyKeys.length + 1);
    assert.equal(after.blobs.length, before.blobs.length + 1);
    const sha256 = after.documents.find((row) => row.id === id)!.sha256;
    assert.ok(after.blobs.includes(sha256));
    if (TEST_DIALECT === 'postgres') assert.ok(after.blobChunks > before.blobChunks, 'its bytes are in blob_chunks');
    else assert.ok(after.files.includes(path.join(sha256.slice(0, 2), sha256)), 'its bytes are in a blob file');
    assert.deepEqual(staging(), []);
  });

  const asPayload = (bytes: Buffer) => ({ payload: bytes.toString('base64') });
  const cases: { name: string; body: () => unknown; headers?: Record<string, string>; url?: string; status: number; code: string }[] = [
    { name: 'a missing payload', body: () => ({ name: 'x.pdf' }), status: 400, code: 'invalid-parameter' },
    { name: 'a non-string payload', body: () => ({ payload: 42 }), status: 400, code: 'invalid-parameter' },
    { name: 'an empty payload', body: () => ({ payload: '' }), status: 400, code: 'invalid-parameter' },
    {
      name: 'invalid base64 (a good PDF with one "*" in it)',
      body: () => ({ payload: `${goodBase64.slice(0, 100)}*${goodBase64.slice(100)}` }),
      status: 400,
      code: 'invalid-parameter',
    },
    { name: 'malformed JSON around a good PDF', body: () => `{"payload": "${goodBase64}"`, status: 400, code: 'malformed-request' },
    {
      name: 'a "__proto__" key beside a good PDF',
      body: () => `{"__proto__": {"x": 1}, "payload": "${goodBase64}"}`,
      status: 400,
      code: 'malformed-request',
    },
    {
      name: 'a good PDF sent as text/plain',
      body: () => ({ payload: goodBase64 }),
      headers: { 'content-type': 'text/plain' },
      status: 415,
      code: 'unsupported-media-type',
    },
    { name: 'text', body: () => asPayload(Buffer.from('just some text')), status: 415, code: 'unsupported-media-type' },
    { name: 'a ZIP file', body: () => asPayload(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0, 8, 0])), status: 415, code: 'unsupported-media-type' },
    {
      name: 'random bytes',
      body: () => asPayload(Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256))),
      status: 415,
      code: 'unsupported-media-type',
    },
    {
      name: 'a readable PDF one byte over the size limit once decoded',
      body: () => asPayload(Buffer.concat([good, Buffer.alloc(MAX_BYTES + 1 - good.length, 0x20)])),
      status: 413,
      code: 'payload-too-large',
    },
    { name: 'a PDF cut after 40 bytes', body: () => asPayload(good.subarray(0, 40)), status: 422, code: 'document-unreadable' },
    {
      name: 'a PDF with a header and an end but nothing between',
      body: () => asPayload(Buffer.from('%PDF-1.4\n%%EOF')),
      status: 422,
      code: 'document-unreadable',
    },
    { name: 'a garbage PDF', body: () => asPayload(Buffer.from(`%PDF-1.7\n${'garbage '.repeat(100)}`)), status: 422, code: 'document-unreadable' },
    {
      name: 'a PDF that needs a password',
      body: () => asPayload(readFileSync(path.join(corpusDir(), 'issue15893_reduced.pdf'))),
      status: 422,
      code: 'document-encrypted',
    },
    { name: 'a PNG claiming 100000×100000 pixels', body: () => asPayload(pngHeaderOnly(100_000, 100_000)), status: 422, code: 'document-unreadable' },
    {
      name: 'a good PDF for a room that does not exist',
      body: () => ({ payload: goodBase64 }),
      url: DOCS('acme', 'nope'),
      status: 404,
      code: 'room-not-found',
    },
  ];
  for (const [index, { name, body, headers = {}, url = DOCS(), status, code }] of cases.entries()) {
    it(`answers ${name} with ${status} ${code} and stores nothing`, async () => {
      const before = await stored();
      assert.deepEqual(staging(), [], 'nothing staged to begin with');
      // With a retry key, as a careful client sends: a refused upload leaves no idempotency record either.
      const response = await upload(t, body(), { 'idempotency-key': `refused-${index}`, ...headers }, url);
      assert.equal(response.statusCode, status, response.body);
      assert.equal(response.headers['content-type'], PROBLEM_JSON);
      const problem = response.json();
      assert.equal(problem.code, code);
      assert.equal(problem.status, status);
      assert.ok(typeof problem.detail === 'string' && problem.detail.length > 0, 'the problem says why');
      assert.deepEqual(await stored(), before, 'the list, the rows, the blobs and the files are as before');
      assert.deepEqual(staging(), [], 'no staged file is left behind');
    });
  }

  it('answers 413 to a body declared far too large before it is sent, over a real connection', { timeout: 60_000 }, async (context) => {
    // The timeout only turns a server that waits for the 200 MB into a failure instead of a hang
    // (and then drops the connection, so that closing the app does not wait for it either).
    const before = await stored();
    const address = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }));
    const socket = connect(Number(address.port), address.hostname);
    context.signal.addEventListener('abort', () => socket.destroy(), { once: true });
    await once(socket, 'connect');
    const declared = 200_000_000;
    const sent =
      `POST ${DOCS()} HTTP/1.1\r\nHost: ${address.host}\r\nAuthorization: ${auth}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n{"payload":"${goodBase64.slice(0, 16)}`;
    socket.write(sent);
    const answer = await new Promise<{ status: number; headers: Map<string, string>; body: string; bytesWritten: number; ourSideOpen: boolean }>(
      (resolve, reject) => {
        let received = Buffer.alloc(0);
        socket.on('data', (chunk: Buffer) => {
          received = Buffer.concat([received, chunk]);
          try {
            const response = completeResponse(received);
            if (response !== undefined) resolve({ ...response, bytesWritten: socket.bytesWritten, ourSideOpen: !socket.writableEnded && !socket.destroyed });
          } catch (error) {
            reject(error);
          }
        });
        socket.on('error', reject);
        socket.on('close', () => reject(new Error(`the connection closed without a complete response: ${JSON.stringify(received.toString('latin1'))}`)));
      },
    );
    socket.destroy();
    assert.equal(answer.ourSideOpen, true, 'the answer came while the request was still being sent');
    assert.equal(answer.bytesWritten, Buffer.byteLength(sent), 'only the headers and a few bytes of the body were sent');
    assert.equal(answer.status, 413);
    assert.equal(answer.headers.get('content-type'), PROBLEM_JSON);
    assert.equal(answer.headers.get('connection'), 'close', 'the server will not read the rest');
    const problem = JSON.parse(answer.body);
    assert.equal(problem.code, 'payload-too-large');
    assert.equal(problem.status, 413);
    assert.equal(problem.instance, DOCS());
    assert.deepEqual(await stored(), before);
    assert.deepEqual(staging(), []);
  });

  it('renders a PDF that PDFium cannot open with pdf.js: a file without its %PDF- header line', async () => {
    const header = Buffer.from('%PDF-1.7\n', 'latin1');
    assert.ok(good.subarray(0, header.length).equals(header));
    // A comment of the same length in place of the header: the cross-reference offsets stay right.
    const headerless = Buffer.concat([Buffer.from('%comment\n', 'latin1'), good.subarray(header.length)]);
    assert.equal(headerless.includes('%PDF-'), false);
    // The premise: PDFium (the first renderer) refuses the file, so a thumbnail can only come from pdf.js.
    const pdfium = await PDFiumLibrary.init();
    try {
      await assert.rejects(pdfium.loadDocument(headerless), /not in PDF format/);
    } finally {
      pdfium.destroy();
    }

    const response = await upload(t, { payload: headerless.toString('base64'), name: 'no-header.pdf' });
    assert.equal(response.statusCode, 201, response.body);
    await assertShowsTopHalfBlackPage(thumbnailOf(response));
    const metadata = (await t.app.inject({ url: `${DOCS()}/${response.json().id}`, headers: { authorization: auth } })).json();
    assert.deepEqual(
      { mediaType: metadata.mediaType, size: metadata.size, pageCount: metadata.pageCount, thumbnail: metadata.thumbnail },
      { mediaType: 'application/pdf', size: headerless.length, pageCount: 1, thumbnail: 'rendered' },
    );
    const content = await t.app.inject({ url: `${DOCS()}/${response.json().id}/content`, headers: { authorization: auth } });
    assert.deepEqual(content.rawPayload, headerless);
  });
});

describe('render memory budget', () => {
  let t: TestApp;

  before(async () => {
    // A timeout far beyond what the bomb below takes to render when memory is no object (27 s when
    // measured, ending in a real thumbnail): the memory limit, not the clock, must be what stops it.
    t = await startTestApp({ SIGNROOM_RENDER_MEMORY_MB: '200', SIGNROOM_RENDER_TIMEOUT_MS: '300000', SIGNROOM_RENDER_WORKERS: '1' });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('stores a PDF whose page 1 needs more memory than the budget with the placeholder', async () => {
    // The worker passes 200 MiB within a fraction of a second (the pool's reason, seen by hand:
    // "rendering needed more than 200 MiB"); with memory to spare it would render the page.
    const bomb = contentStreamBomb();
    const response = await upload(t, { payload: bomb.toString('base64'), name: 'bomb.pdf' });
    assert.equal(response.statusCode, 201, response.body);
    await assertPlaceholder(thumbnailOf(response));
    const { id } = response.json();
    const metadata = (await t.app.inject({ url: `${DOCS()}/${id}`, headers: { authorization: auth } })).json();
    assert.deepEqual(
      { name: metadata.name, mediaType: metadata.mediaType, size: metadata.size, pageCount: metadata.pageCount, thumbnail: metadata.thumbnail },
      { name: 'bomb.pdf', mediaType: 'application/pdf', size: bomb.length, pageCount: 1, thumbnail: 'placeholder' },
    );
    const thumbnail = await t.app.inject({ url: `${DOCS()}/${id}/thumbnail`, headers: { authorization: auth } });
    assert.deepEqual(thumbnail.rawPayload, thumbnailOf(response));
    const content = await t.app.inject({ url: `${DOCS()}/${id}/content`, headers: { authorization: auth } });
    assert.deepEqual(content.rawPayload, bomb, 'the document itself is kept whole');
  });

  it('renders a normal PDF afterwards', async () => {
    const response = await upload(t, { payload: topHalfBlackPdf().toString('base64') });
    assert.equal(response.statusCode, 201, response.body);
    await assertShowsTopHalfBlackPage(thumbnailOf(response));
    const metadata = (await t.app.inject({ url: `${DOCS()}/${response.json().id}`, headers: { authorization: auth } })).json();
    assert.equal(metadata.thumbnail, 'rendered');
  });
});

/** The status, headers and body of an HTTP/1.1 response once all of it (by Content-Length) has arrived. */
function completeResponse(received: Buffer): { status: number; headers: Map<string, string>; body: string } | undefined {
  const end = received.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const [statusLine, ...lines] = received.toString('latin1', 0, end).split('\r\n');
  const headers = new Map(
    lines.map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()] as const;
    }),
  );
  const length = Number(headers.get('content-length'));
  assert.ok(Number.isSafeInteger(length), `the answer has a Content-Length: ${statusLine}`);
  if (received.length < end + 4 + length) return undefined;
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]);
  return { status, headers, body: received.toString('utf8', end + 4, end + 4 + length) };
}
