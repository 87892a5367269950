import { createHash, randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { corpusDir } from '../helpers/corpus.ts';
import { DIRECTORY, ACME_PASSWORD } from '../helpers/fixtures.ts';
import { inspectPng, pngHeaderOnly, solidImage } from '../helpers/images.ts';
import { makePdf, topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';

const corpusFile = (name: string) => readFileSync(path.join(corpusDir(), name));
const DOCS = (org = 'acme', room = 'board') => `/admin/api/v3/organizations/${org}/rooms/${room}/documents`;
const MAX_BYTES = 300_000;

describe('document upload and retrieval', () => {
  let t: TestApp;
  const auth = basic('acme-admin', ACME_PASSWORD);
  const upload = (body: unknown, headers: Record<string, string> = {}, url = DOCS()) =>
    t.app.inject({
      method: 'POST',
      url,
      headers: { authorization: auth, 'content-type': 'application/json', ...headers },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const uploadBytes = (bytes: Buffer, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    upload({ payload: bytes.toString('base64'), ...extra }, headers);
  const thumbnailOf = (response: { json(): { thumbnail: string } }) => {
    const match = /^data:image\/png;base64,([A-Za-z0-9+/]+=*)$/.exec(response.json().thumbnail);
    assert.ok(match, 'thumbnail is a PNG data URI');
    return Buffer.from(match[1]!, 'base64');
  };

  before(async () => {
    t = await startTestApp({ SIGNROOM_MAX_DOCUMENT_BYTES: String(MAX_BYTES) });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('stores a PDF and answers 201, Location and a thumbnail that shows page 1', async () => {
    const response = await uploadBytes(topHalfBlackPdf(), { name: 'contract.pdf' });
    assert.equal(response.statusCode, 201, response.body);
    const { id } = response.json();
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(response.headers['location'], `${DOCS()}/${id}`);
    const png = await inspectPng(thumbnailOf(response));
    assert.equal(png.width, 200);
    assert.equal(png.height, 283);
    assert.ok(png.meanOf(0.05, 0.45) < 20, 'the top half is black');
    assert.ok(png.meanOf(0.55, 0.7) > 230, 'below it the page is white');
    assert.ok(png.meanOf(0.7, 0.8) < 250, 'the Helvetica text is drawn');
  });

  it('keeps the aspect ratio, caps tall pages at twice the width and honours rotation and crop box', async () => {
    const cases: [Buffer, number][] = [
      [makePdf([{ width: 200, height: 2000, content: '0 0 0 rg 0 1900 200 100 re f' }]), 400],
      [makePdf([{ width: 842, height: 595, content: '' }]), 141],
      [makePdf([{ width: 595, height: 842, content: '', rotate: 90 }]), 141],
      [makePdf([{ width: 600, height: 600, content: '', cropBox: [0, 0, 600, 300] }]), 100],
    ];
    for (const [pdf, height] of cases) {
      const response = await uploadBytes(pdf);
      assert.equal(response.statusCode, 201, response.body);
      const png = await inspectPng(thumbnailOf(response));
      assert.deepEqual([png.width, png.height], [200, height]);
    }
    // The tall page shows its top: the black band at the top of the page.
    const tall = await inspectPng(thumbnailOf(await uploadBytes(cases[0]![0])));
    assert.ok(tall.meanOf(0, 0.2) < 20);
  });

  it('takes PNG and JPEG images, scaled to the thumbnail width', async () => {
    for (const format of ['png', 'jpeg'] as const) {
      const response = await uploadBytes(await solidImage(1000, 500, format, 0));
      assert.equal(response.statusCode, 201, response.body);
      const png = await inspectPng(thumbnailOf(response));
      assert.deepEqual([png.width, png.height], [200, 100]);
      assert.ok(png.meanOf(0, 1) < 10);
      const metadata = (await t.app.inject({ url: `${DOCS()}/${response.json().id}`, headers: { authorization: auth } })).json();
      assert.equal(metadata.mediaType, `image/${format}`);
      assert.equal(metadata.pageCount, 1);
    }
  });

  it('accepts URL-safe base64, missing padding, line breaks and a data URI', async () => {
    const pdf = topHalfBlackPdf();
    for (const payload of [
      pdf.toString('base64url'),
      pdf.toString('base64').replace(/=+$/, ''),
      pdf.toString('base64').replace(/(.{76})/g, '$1\r\n'),
      `data:application/pdf;base64,${pdf.toString('base64')}`,
      `\r\n data:application/pdf;base64,${pdf.toString('base64')}`,
    ]) {
      assert.equal((await upload({ payload })).statusCode, 201);
    }
  });

  it('takes a null name as none, as serializers send an optional field left empty', async () => {
    const response = await upload({ payload: topHalfBlackPdf().toString('base64'), name: null });
    assert.equal(response.statusCode, 201, response.body);
    const metadata = (await t.app.inject({ url: `${DOCS()}/${response.json().id}`, headers: { authorization: auth } })).json();
    assert.equal(metadata.name, null);
  });

  it("answers a document's metadata with an ETag, and If-None-Match naming it with 304", async () => {
    const response = await upload({ payload: topHalfBlackPdf().toString('base64'), name: 'tagged.pdf' });
    assert.equal(response.statusCode, 201, response.body);
    const url = `${DOCS()}/${response.json().id}`;
    const read = await t.app.inject({ url, headers: { authorization: auth } });
    assert.equal(read.statusCode, 200);
    const etag = read.headers['etag'];
    assert.match(String(etag), /^"[A-Za-z0-9_-]+"$/);
    assert.equal((await t.app.inject({ url, headers: { authorization: auth } })).headers['etag'], etag);
    const notModified = await t.app.inject({ url, headers: { authorization: auth, 'if-none-match': String(etag) } });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.body, '');
    assert.equal(notModified.headers['etag'], etag);
    assert.equal((await t.app.inject({ url, headers: { authorization: auth, 'if-none-match': '"other"' } })).statusCode, 200);
  });

  const badRequests: [string, unknown, string][] = [
    ['a missing payload', {}, 'payload'],
    ['a non-string payload', { payload: 42 }, 'payload'],
    ['an empty payload', { payload: '' }, 'payload'],
    ['invalid base64', { payload: 'JVBERi0x*jQK' }, 'payload'],
    ['base64 with junk at the end', { payload: `${topHalfBlackPdf().toString('base64')}!` }, 'payload'],
    ['a name too long', { payload: 'JVBERi0xLjQK', name: 'x'.repeat(256) }, 'name'],
    ['a name that is not a string', { payload: 'JVBERi0xLjQK', name: 7 }, 'name'],
  ];
  for (const [name, body, parameter] of badRequests) {
    it(`refuses ${name} with a 400 naming ${parameter}`, async () => {
      const response = await upload(body);
      assert.equal(response.statusCode, 400, response.body);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(response.json().code, 'invalid-parameter');
      assert.deepEqual(
        response.json().errors.map((e: { parameter: string }) => e.parameter),
        [parameter],
      );
    });
  }

  it('refuses malformed JSON, prototype keys and non-objects with a 400', async () => {
    for (const body of [
      '{"payload": ',
      '{"__proto__": {"x": 1}, "payload": "JVBERi0xLjQK"}',
      '{"constructor": {"prototype": {}}, "payload": "x"}',
      '[]',
      '"text"',
    ]) {
      const response = await upload(body);
      assert.equal(response.statusCode, 400, `${body}: ${response.body}`);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      const problem = response.json();
      const expected = body.startsWith('[') || body.startsWith('"') ? 'invalid-parameter' : 'malformed-request';
      assert.equal(problem.code, expected, body);
      assert.ok(Array.isArray(problem.errors) && problem.errors.length > 0, `${body}: a 400 names what is wrong`);
      if (expected === 'malformed-request') assert.equal(problem.errors[0].parameter, 'body');
    }
  });

  it('refuses a body that is not JSON with a 415', async () => {
    const response = await upload('payload=abc', { 'content-type': 'text/plain' });
    assert.equal(response.statusCode, 415);
    assert.equal(response.json().code, 'unsupported-media-type');
  });

  it('refuses content that is not a PDF, PNG or JPEG with a 415', async () => {
    const zip = Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0, 8, 0]);
    const random = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256));
    for (const bytes of [Buffer.from('just some text'), zip, random]) {
      const response = await uploadBytes(bytes);
      assert.equal(response.statusCode, 415, response.body);
      assert.equal(response.json().code, 'unsupported-media-type');
    }
  });

  it('takes a document of nearly the maximum size with escaped line breaks and slashes', async () => {
    const bytes = Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.alloc(MAX_BYTES - 9, 0xff)]);
    // All 0xFF bytes encode as "/", which JSON may escape as "\/"; MIME line breaks as "\r\n".
    const payload = bytes.toString('base64').replace(/(.{76})/g, '$1\r\n');
    const body = JSON.stringify({ payload }).replaceAll('/', '\\/');
    const response = await upload(body);
    assert.equal(response.statusCode, 422, response.body); // it is not a real PDF, but it was read whole
    assert.equal(response.json().code, 'document-unreadable');
  });

  it('refuses a document over the size limit with a 413, and a far too large body before reading it', async () => {
    const big = Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.alloc(MAX_BYTES)]);
    const decoded = await uploadBytes(big);
    assert.equal(decoded.statusCode, 413);
    assert.equal(decoded.json().code, 'payload-too-large');
    const huge = await upload({ payload: 'A'.repeat(MAX_BYTES * 3) });
    assert.equal(huge.statusCode, 413);
    assert.equal(huge.headers['content-type'], 'application/problem+json; charset=utf-8');
  });

  it('reads a body sent in chunks of unknown length, and refuses one shorter than its declared length', async () => {
    const body = JSON.stringify({ payload: topHalfBlackPdf().toString('base64'), name: 'chunked.pdf' });
    const chunked = await t.app.inject({
      method: 'POST',
      url: DOCS(),
      headers: { authorization: auth, 'content-type': 'application/json' },
      payload: Readable.from([body.slice(0, 100), body.slice(100, 5000), body.slice(5000)].map((part) => Buffer.from(part))),
    });
    assert.equal(chunked.raw.req.headers['content-length'], undefined, 'sent without a length');
    assert.equal(chunked.statusCode, 201, chunked.body);
    const short = await upload(body, { 'content-length': String(Buffer.byteLength(body) + 10) });
    assert.equal(short.statusCode, 400, short.body);
    assert.equal(short.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(short.json().code, 'malformed-request');
    assert.equal(short.json().errors[0].parameter, 'Content-Length');
  });

  it('refuses truncated and garbage PDFs with a 422', async () => {
    const pdf = topHalfBlackPdf();
    for (const bytes of [Buffer.from('%PDF-1.4\n%%EOF'), Buffer.from(`%PDF-1.7\n${'garbage '.repeat(100)}`), pdf.subarray(0, 40)]) {
      const response = await uploadBytes(bytes);
      assert.equal(response.statusCode, 422, response.body);
      assert.equal(response.json().code, 'document-unreadable');
      assert.ok(response.json().detail.length > 0);
    }
  });

  it('refuses a PDF that needs a password with 422 document-encrypted, and renders an owner-password-only one', async () => {
    const locked = await uploadBytes(corpusFile('issue15893_reduced.pdf'));
    assert.equal(locked.statusCode, 422, locked.body);
    assert.equal(locked.json().code, 'document-encrypted');
    const ownerOnly = await uploadBytes(corpusFile('issue17215.pdf'));
    assert.equal(ownerOnly.statusCode, 201, ownerOnly.body);
  });

  it('refuses an image whose header claims 100000×100000 pixels', async () => {
    const response = await uploadBytes(pngHeaderOnly(100_000, 100_000));
    assert.equal(response.statusCode, 422, response.body);
    assert.equal(response.json().code, 'document-unreadable');
  });

  it('renders the largest page box and an empty one (read as US Letter, as poppler does) as real thumbnails', async () => {
    // 14400 units is the largest page PDF allows: cheap to draw at thumbnail size, so page 1 is shown, all black.
    // An empty box is no reason for a placeholder either: readers show a blank US Letter page (612×792).
    const cases: [Buffer, number, (png: Awaited<ReturnType<typeof inspectPng>>) => boolean][] = [
      [makePdf([{ width: 14400, height: 14400, content: '0 0 0 rg 0 0 14400 14400 re f' }]), 200, (png) => png.meanOf(0, 1) < 5],
      [makePdf([{ width: 0, height: 0, content: '' }]), 259, (png) => png.meanOf(0, 1) > 250],
    ];
    for (const [pdf, height, shown] of cases) {
      const response = await uploadBytes(pdf);
      assert.equal(response.statusCode, 201, response.body);
      const png = await inspectPng(thumbnailOf(response));
      assert.deepEqual([png.width, png.height], [200, height]);
      assert.ok(shown(png), `page 1 as drawn, not the grey placeholder (mean ${png.meanOf(0, 1)})`);
      const metadata = (await t.app.inject({ url: `${DOCS()}/${response.json().id}`, headers: { authorization: auth } })).json();
      assert.equal(metadata.thumbnail, 'rendered');
      assert.equal(metadata.pageCount, 1);
    }
  });

  it('replays an upload with the same Idempotency-Key, refuses the key for another body, and says when its document was deleted', async () => {
    const pdf = topHalfBlackPdf();
    const first = await uploadBytes(pdf, { name: 'a.pdf' }, { 'idempotency-key': 'key-1' });
    const again = await uploadBytes(pdf, { name: 'a.pdf' }, { 'idempotency-key': 'key-1' });
    assert.equal(first.statusCode, 201);
    assert.equal(again.statusCode, 201);
    assert.deepEqual(again.json(), first.json());
    assert.equal(again.headers['location'], first.headers['location']);
    const other = await uploadBytes(pdf, { name: 'b.pdf' }, { 'idempotency-key': 'key-1' });
    assert.equal(other.statusCode, 422);
    assert.equal(other.json().code, 'idempotency-key-reused');
    const bad = await uploadBytes(pdf, {}, { 'idempotency-key': 'bad key\u00e9' });
    assert.equal(bad.statusCode, 400);
    const withoutName = await uploadBytes(pdf, { name: '' }, { 'idempotency-key': 'key-1' });
    assert.equal(withoutName.statusCode, 422, 'an empty name is another body than "a.pdf"');

    // Once the document is deleted, a late retry is told so (a 201 would name a document that is gone), and nothing is stored.
    const id = first.json().id;
    assert.equal((await t.app.inject({ method: 'DELETE', url: `${DOCS()}/${id}`, headers: { authorization: auth } })).statusCode, 204);
    const listedBefore = (await t.app.inject({ url: DOCS(), headers: { authorization: auth } })).json().totalElements;
    const late = await uploadBytes(pdf, { name: 'a.pdf' }, { 'idempotency-key': 'key-1' });
    assert.equal(late.statusCode, 409);
    assert.equal(late.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(late.json().code, 'idempotency-key-document-deleted');
    assert.match(late.json().detail, new RegExp(`\\(${id}\\) has been deleted`));
    assert.equal((await t.app.inject({ url: `${DOCS()}/${id}`, headers: { authorization: auth } })).statusCode, 404, 'nothing new was created');
    assert.equal((await t.app.inject({ url: DOCS(), headers: { authorization: auth } })).json().totalElements, listedBefore);
  });

  it('lists, reads, serves and deletes documents, scoped like the lookup', async () => {
    const pdf = makePdf([
      { width: 300, height: 300, content: '' },
      { width: 300, height: 300, content: '' },
    ]);
    const created = await uploadBytes(pdf, { name: 'two pages.pdf' });
    const { id } = created.json();
    const list = (await t.app.inject({ url: `${DOCS()}?size=1`, headers: { authorization: auth } })).json();
    assert.equal(list.content[0].id, id, 'newest first');
    assert.equal(list.size, 1);
    assert.ok(list.totalElements > 1);

    const metadata = (await t.app.inject({ url: `${DOCS()}/${id}`, headers: { authorization: auth } })).json();
    assert.deepEqual(
      {
        name: metadata.name,
        mediaType: metadata.mediaType,
        size: metadata.size,
        pageCount: metadata.pageCount,
        uploadedBy: metadata.uploadedBy,
        thumbnail: metadata.thumbnail,
      },
      { name: 'two pages.pdf', mediaType: 'application/pdf', size: pdf.length, pageCount: 2, uploadedBy: 'acme-admin', thumbnail: 'rendered' },
    );
    assert.match(metadata.sha256, /^[0-9a-f]{64}$/);

    const content = await t.app.inject({ url: `${DOCS()}/${id}/content`, headers: { authorization: auth } });
    assert.equal(content.statusCode, 200);
    assert.equal(content.headers['content-type'], 'application/pdf');
    assert.deepEqual(content.rawPayload, pdf);
    assert.equal(content.headers['cache-control'], 'private, no-cache');
    assert.equal(content.headers['content-disposition'], `inline; filename="two pages.pdf"; filename*=UTF-8''two%20pages.pdf`);
    const etag = String(content.headers['etag']);
    assert.equal(etag, `"${metadata.sha256}"`);
    const notModified = await t.app.inject({ url: `${DOCS()}/${id}/content`, headers: { authorization: auth, 'if-none-match': etag } });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.body, '');

    const thumbnail = await t.app.inject({ url: `${DOCS()}/${id}/thumbnail`, headers: { authorization: auth } });
    assert.equal(thumbnail.headers['content-type'], 'image/png');
    assert.deepEqual(thumbnail.rawPayload, thumbnailOf(created));

    assert.equal((await t.app.inject({ url: `${DOCS('acme', 'empty')}/${id}`, headers: { authorization: auth } })).statusCode, 404);
    assert.equal((await t.app.inject({ url: `${DOCS('other', 'lobby')}/${id}`, headers: { authorization: auth } })).statusCode, 403);
    assert.equal((await t.app.inject({ url: `${DOCS('acme', 'nope')}`, headers: { authorization: auth } })).json().code, 'room-not-found');

    const deleted = await t.app.inject({ method: 'DELETE', url: `${DOCS()}/${id}`, headers: { authorization: auth } });
    assert.equal(deleted.statusCode, 204);
    const gone = await t.app.inject({ url: `${DOCS()}/${id}`, headers: { authorization: auth } });
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json().code, 'document-not-found');
    assert.equal((await t.storedBlobs()).includes(metadata.sha256), false, 'the blob went with its only document');
  });

  it('stores identical bytes once', async () => {
    const pdf = makePdf([{ width: 123, height: 456, content: '' }]);
    const a = (await uploadBytes(pdf)).json().id;
    const b = (await uploadBytes(pdf)).json().id;
    assert.notEqual(a, b);
    const sha = (await t.app.inject({ url: `${DOCS()}/${a}`, headers: { authorization: auth } })).json().sha256;
    assert.equal((await t.storedBlobs()).filter((stored) => stored === sha).length, 1);
    await t.app.inject({ method: 'DELETE', url: `${DOCS()}/${a}`, headers: { authorization: auth } });
    assert.ok((await t.storedBlobs()).includes(sha), 'still used by the other document');
  });
});

describe('document storage recovery', () => {
  it('removes temporary files and orphan blobs at start, and keeps referenced ones', async () => {
    const first = await startTestApp();
    await first.importDirectory(DIRECTORY);
    const created = await first.app.inject({
      method: 'POST',
      url: DOCS(),
      headers: { authorization: basic('acme-admin', ACME_PASSWORD), 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: topHalfBlackPdf().toString('base64') }),
    });
    assert.equal(created.statusCode, 201);
    await first.app.close();
    const blobs = path.join(first.dataDir, 'blobs');
    const orphan = 'f'.repeat(64);
    await first.plantOrphanBlob(orphan);
    writeFileSync(path.join(blobs, 'tmp', 'half-written.part'), 'partial');
    const referenced = createHash('sha256').update(topHalfBlackPdf()).digest('hex');
    const { buildApp } = await import('../../src/app.ts');

    // While another process uses the directory (here: this test's parent, which runs), what it may
    // be writing stays: its temporary files, and (files) blobs it may be about to name.
    const other = path.join(blobs, 'processes', `${process.ppid}@${hostname()}`);
    writeFileSync(other, '');
    const inFlight = `${process.ppid}@${hostname()}.${randomUUID()}.part`;
    writeFileSync(path.join(blobs, 'tmp', inFlight), 'partial');
    writeFileSync(path.join(blobs, 'tmp', `999999999@${hostname()}.${randomUUID()}.part`), 'partial');
    const beside = await buildApp(first.config);
    await beside.close();
    assert.deepEqual(readdirSync(path.join(blobs, 'tmp')).sort(), ['half-written.part', inFlight].sort(), 'only the ended process is cleared');
    if (TEST_DIALECT === 'sqlite') assert.deepEqual(await first.storedBlobs(), [referenced, orphan].sort(), 'no blob deleted while another process runs');
    rmSync(other);
    // A process on another host (a container sharing the volume) that stopped touching its file long ago has ended.
    const elsewhere = path.join(blobs, 'processes', '1@another-host');
    writeFileSync(elsewhere, '');
    utimesSync(elsewhere, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));

    const again = await buildApp(first.config);
    try {
      assert.deepEqual(await first.storedBlobs(), [referenced], 'the orphan is gone, the referenced blob stays');
      assert.deepEqual(readdirSync(path.join(blobs, 'tmp')), []);
      assert.ok(!existsSync(elsewhere), 'the ended process is forgotten');
      const content = await again.inject({
        url: `${DOCS()}/${created.json().id}/content`,
        headers: { authorization: basic('acme-admin', ACME_PASSWORD) },
      });
      assert.deepEqual(content.rawPayload, topHalfBlackPdf());
    } finally {
      await again.close();
      await first.close();
    }
  });
});
