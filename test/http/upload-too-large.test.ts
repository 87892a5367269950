import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { solidImage } from '../helpers/images.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const LIMIT = 100_000;
const AUTH = basic('acme-admin', ACME_PASSWORD);

/** An upload body whose payload decodes to `bytes` bytes, as a client would send it. */
function uploadBody(bytes: number): string {
  return JSON.stringify({ payload: Buffer.alloc(bytes, 0x25).toString('base64') });
}

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

  for (const factor of [2, 10]) {
    it(`answers fetch (undici) with the problem, ten times in a row, for a body of ${factor}× the limit`, async () => {
      const body = uploadBody(LIMIT * factor);
      for (let attempt = 0; attempt < 10; attempt++) {
        const response = await fetch(url, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body });
        assert.equal(response.status, 413, `attempt ${attempt}`);
        assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal((await response.json()).code, 'payload-too-large');
      }
    });

    it(`answers curl with the problem, ten times in a row, for a body of ${factor}× the limit`, async () => {
      const file = path.join(dir, `body-${factor}.json`);
      writeFileSync(file, uploadBody(LIMIT * factor));
      for (let attempt = 0; attempt < 10; attempt++) {
        // curl exits 0 once it has read a whole answer; a reset or broken pipe is exit 55 or 56.
        const { stdout } = await promisify(execFile)('curl', [
          '--silent',
          '--show-error',
          '--write-out',
          '\n%{http_code}',
          '--header',
          `authorization: ${AUTH}`,
          '--header',
          'content-type: application/json',
          '--data-binary',
          `@${file}`,
          url,
        ]);
        const lines = stdout.trimEnd().split('\n');
        assert.equal(lines.at(-1), '413', `attempt ${attempt}: ${stdout}`);
        assert.equal(JSON.parse(lines.slice(0, -1).join('\n')).code, 'payload-too-large');
      }
    });
  }

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
