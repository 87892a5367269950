import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { corpusDir } from '../helpers/corpus.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

/*
 * Every real-world PDF of ../shared/pdf-corpus (pdf.js bug reports: odd, broken,
 * encrypted) is uploaded: each gets a 201 or a 4xx problem with a reason, and the
 * server stays up (how long each takes is measured by npm run bench:upload). For the files we refuse, poppler
 * (pdftoppm) is asked whether it can render page 1; that share is reported.
 */

const CORPUS = corpusDir();
const TIMEOUT_MS = 10_000;
const run = promisify(execFile);

async function popplerRenders(file: string): Promise<boolean> {
  const out = mkdtempSync(path.join(tmpdir(), 'signroom-poppler-'));
  try {
    await run('pdftoppm', ['-f', '1', '-l', '1', '-scale-to-x', '200', '-scale-to-y', '-1', '-png', file, path.join(out, 'p')], { timeout: 30_000 });
    return readdirSync(out).length > 0;
  } catch {
    return false;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

describe('real-world PDF corpus', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ SIGNROOM_RENDER_TIMEOUT_MS: String(TIMEOUT_MS) });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('answers every file with 201 or a reasoned 4xx in time, and stays up', async (context) => {
    try {
      await run('pdftoppm', ['-v']);
    } catch {
      assert.fail('pdftoppm is missing: install Debian poppler-utils (apt-get install poppler-utils); .ci/run does');
    }
    const files = readdirSync(CORPUS)
      .filter((name) => name.toLowerCase().endsWith('.pdf'))
      .sort();
    assert.ok(files.length > 100, `expected the corpus at ${CORPUS}`);
    const auth = basic('acme-admin', ACME_PASSWORD);
    const results: { file: string; status: number; code?: string; ms: number }[] = [];
    const queue = [...files];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
          const started = performance.now();
          const response = await t.app.inject({
            method: 'POST',
            url: '/admin/api/v3/organizations/acme/rooms/board/documents',
            headers: { authorization: auth, 'content-type': 'application/json' },
            payload: JSON.stringify({ payload: readFileSync(path.join(CORPUS, file)).toString('base64'), name: file }),
          });
          const ms = performance.now() - started;
          const body = response.json();
          if (response.statusCode === 201) {
            assert.match(body.thumbnail, /^data:image\/png;base64,/, file);
          } else {
            assert.ok(response.statusCode >= 400 && response.statusCode < 500, `${file}: ${response.statusCode} ${response.body}`);
            assert.ok(typeof body.code === 'string' && body.detail.length > 0, `${file}: ${response.body}`);
          }
          results.push({ file, status: response.statusCode, code: body.code, ms });
        }
      }),
    );
    assert.equal((await t.app.inject({ url: '/livez' })).statusCode, 200);
    assert.equal((await t.app.inject({ url: '/readyz' })).statusCode, 200);

    const refused = results.filter((result) => result.status !== 201);
    const popplerRendered: string[] = [];
    for (const result of refused) {
      if (await popplerRenders(path.join(CORPUS, result.file))) popplerRendered.push(`${result.file} (${result.code})`);
    }
    const placeholders = (await t.app.inject({ url: '/admin/api/v3/organizations/acme/rooms/board/documents?size=2000', headers: { authorization: auth } }))
      .json()
      .content.filter((doc: { thumbnail: string }) => doc.thumbnail === 'placeholder').length;
    context.diagnostic(
      `${files.length} files: ${results.length - refused.length} stored (${placeholders} with a placeholder), ${refused.length} refused ` +
        `(${refused.map((r) => `${r.file}: ${r.code}`).join(', ')}); poppler renders ${popplerRendered.length} of the refused ` +
        `(${((popplerRendered.length / files.length) * 100).toFixed(1)}% of the corpus)${popplerRendered.length > 0 ? `: ${popplerRendered.join(', ')}` : ''}; ` +
        `slowest ${Math.max(...results.map((r) => r.ms)).toFixed(0)} ms`,
    );
    // Encrypted files are refused by design; anything else poppler can draw we should store.
    assert.ok(popplerRendered.filter((entry) => !entry.includes('document-encrypted')).length <= 2, popplerRendered.join(', '));
  });
});
