import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { ACME_AUTH, DOCUMENTS, renderWorkers, upload } from '../helpers/render-processes.ts';
import { contentStreamBomb, hostilePdfs, makePdf, rawPdf, topHalfBlackPdf } from '../helpers/pdf.ts';
import { compareWithPoppler, FAITHFUL_DIFFERENCE, popplerPage1 } from '../helpers/poppler.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';
import type { RenderPool } from '../../src/documents/render-pool.ts';
import { waitUntil } from '../helpers/wait.ts';

const auth = ACME_AUTH;

/** A stored document's metadata. */
async function metadataOf(t: TestApp, id: string) {
  return (await t.app.inject({ url: `${DOCUMENTS}/${id}`, headers: { authorization: auth } })).json();
}

/*
 * Hostile documents are bounded in time and memory by the render pool: the
 * render is killed, the worker replaced, the upload answered, the server unhurt.
 */
describe('render budget against hostile PDFs', () => {
  let t: TestApp;
  const TIMEOUT_MS = 3000;

  before(async () => {
    t = await startTestApp({ SIGNROOM_RENDER_TIMEOUT_MS: String(TIMEOUT_MS), SIGNROOM_RENDER_MEMORY_MB: '400', SIGNROOM_RENDER_WORKERS: '1' });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('stores a decompression bomb with a placeholder once the render is stopped, and keeps serving', async () => {
    // 200 KB that inflate to 104 MB of drawing operators.
    const bomb = makePdf([{ width: 595, height: 842, content: '0 0 1 1 re f\n'.repeat(8_000_000), compress: true }]);
    const pending = upload(t, bomb);
    // The API answers while the render runs.
    const lookup = await t.app.inject({ url: LOOKUP('acme', 'board'), headers: { authorization: auth } });
    assert.equal(lookup.statusCode, 200);
    const response = await pending;
    assert.equal(response.statusCode, 201, response.body);
    const metadata = await metadataOf(t, response.json().id);
    assert.equal(metadata.thumbnail, 'placeholder');
    assert.equal(metadata.pageCount, 1);
    assert.equal(metadata.size, bomb.length);
  });

  it('answers cyclic page trees and deeply nested objects without crashing', async () => {
    const cyclic = rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>',
    ]);
    const nested = rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Junk ${'['.repeat(100_000)}${']'.repeat(100_000)} >>`,
    ]);
    const negativeBox = makePdf([{ width: -500, height: -500, content: '0 0 0 rg 0 0 10 10 re f' }]);
    for (const pdf of [cyclic, nested, negativeBox]) {
      const response = await upload(t, pdf);
      assert.ok([201, 422].includes(response.statusCode), response.body);
      if (response.statusCode === 422) assert.equal(response.json().code, 'document-unreadable');
    }
  });

  it('renders normally afterwards: the killed worker was replaced', async () => {
    const response = await upload(t, topHalfBlackPdf());
    assert.equal(response.statusCode, 201);
    assert.equal((await metadataOf(t, response.json().id)).thumbnail, 'rendered');
    assert.equal((await t.app.inject({ url: '/readyz' })).statusCode, 200);
  });
});

/** Waits until the render pool's processes are as `holds` says (polled; fails after a minute). */
function renderProcesses(t: TestApp, what: string, holds: (processes: RenderPool['processes']) => boolean): Promise<void> {
  return waitUntil(what, () => holds(t.app.renderer.processes));
}
/** None busy (its memory checked after the last render too): a process frozen now is frozen idle. */
const allIdle = (t: TestApp) => renderProcesses(t, 'the render processes to be idle', (processes) => processes.busy === 0);
/** A render gone to a process (the frozen one): the upload sent just before is the one rendering. */
const renderBegun = (t: TestApp) => renderProcesses(t, 'a render to begin', (processes) => processes.busy > 0);

describe('render pool fairness', () => {
  let t: TestApp;
  const TIMEOUT_MS = 6000;

  before(async () => {
    // One process for renders; while renders wait behind a slow one, others start (up to three in all).
    // The frozen render is not ended by the wall-clock deadline meanwhile, however slow the machine.
    t = await startTestApp({
      SIGNROOM_RENDER_TIMEOUT_MS: String(TIMEOUT_MS),
      SIGNROOM_RENDER_DEADLINE_MS: '60000',
      SIGNROOM_RENDER_WORKERS: '1',
      SIGNROOM_RENDER_MAX_WORKERS: '3',
    });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('lets a slow render delay its own upload only', async () => {
    // A first upload leaves the pool's one process warm; then it is frozen (SIGSTOP), so the next render
    // there runs as long as the test wants, on any machine: a slow render that uses no CPU of its own.
    assert.equal((await upload(t, topHalfBlackPdf())).statusCode, 201);
    const [frozen, ...others] = renderWorkers();
    assert.ok(frozen !== undefined && others.length === 0, 'one render process');
    await allIdle(t);
    process.kill(frozen, 'SIGSTOP');
    const finished: string[] = [];
    const track = async (name: string, pending: ReturnType<typeof upload>) => {
      const response = await pending;
      finished.push(name);
      return response;
    };
    try {
      const slowUpload = track('slow', upload(t, makePdf([{ width: 300, height: 300, content: '0 0 0 rg 0 0 300 150 re f' }])));
      await renderBegun(t);
      // Queued behind the slow render: once it passes 1 s, another process takes this one.
      const normal = await track('normal', upload(t, topHalfBlackPdf()));
      assert.equal(normal.statusCode, 201, normal.body);
      assert.equal((await metadataOf(t, normal.json().id)).thumbnail, 'rendered');
      assert.deepEqual(finished, ['normal'], 'the normal upload finished while the slow one still rendered');
      process.kill(frozen, 'SIGCONT');
      const slow = await slowUpload;
      assert.equal(slow.statusCode, 201, slow.body);
      assert.equal((await metadataOf(t, slow.json().id)).thumbnail, 'rendered');
    } finally {
      process.kill(frozen, 'SIGCONT');
    }
    // The pool is back to its one process (the extra ones stop once no render waits) for the next upload.
    for (let tries = 0; renderWorkers().length > 1 && tries < 100; tries++) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(renderWorkers().length, 1, 'the process started for the slow render has stopped');
    const after = await upload(t, makePdf([{ width: 300, height: 300, content: '0 0 0 rg 0 0 300 150 re f' }]));
    assert.equal((await metadataOf(t, after.json().id)).thumbnail, 'rendered');
  });
});

describe('render pool fairness between uploaders', () => {
  let t: TestApp;

  before(async () => {
    // One kept process, up to three in all, and one render running at a time per uploader.
    t = await startTestApp({
      SIGNROOM_RENDER_WORKERS: '1',
      SIGNROOM_RENDER_MAX_WORKERS: '3',
      SIGNROOM_RENDER_PER_UPLOADER: '1',
      SIGNROOM_RENDER_TIMEOUT_MS: '6000',
      SIGNROOM_RENDER_DEADLINE_MS: '60000',
    });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it("keeps one uploader's second render waiting while another uploader's goes first", async () => {
    assert.equal((await upload(t, topHalfBlackPdf())).statusCode, 201);
    const [frozen] = renderWorkers();
    assert.ok(frozen !== undefined);
    await allIdle(t);
    process.kill(frozen, 'SIGSTOP');
    const finished: string[] = [];
    const track = async (name: string, pending: Promise<{ statusCode: number; body: string }>) => {
      const response = await pending;
      finished.push(name);
      return response;
    };
    const asRoot = (pdf: Buffer) =>
      t.app.inject({
        method: 'POST',
        url: DOCUMENTS,
        headers: { authorization: basic('root', 'root-password'), 'content-type': 'application/json' },
        payload: JSON.stringify({ payload: pdf.toString('base64') }),
      });
    try {
      const first = track('first of acme-admin', upload(t, makePdf([{ width: 300, height: 300, content: '0 0 0 rg 0 0 300 150 re f' }])));
      await renderBegun(t);
      const second = track('second of acme-admin', upload(t, makePdf([{ width: 300, height: 300, content: '0 0 0 rg 0 0 150 300 re f' }])));
      const other = await track('root', asRoot(makePdf([{ width: 300, height: 300, content: '0 0 0 rg 0 0 100 100 re f' }])));
      assert.equal(other.statusCode, 201, other.body);
      assert.deepEqual(finished, ['root'], "the other uploader's render did not wait behind acme-admin's second");
      // A process was free for it all along (three in all): acme-admin's second still waits for its first, frozen.
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(finished, ['root'], "acme-admin's second render waits while its first is not done");
      process.kill(frozen, 'SIGCONT');
      assert.equal((await first).statusCode, 201);
      assert.equal((await second).statusCode, 201);
      // Not their answers' order: the second's render starts when the first's ends, and its upload
      // may then commit before the first's own write does.
      assert.deepEqual([...finished].sort(), ['first of acme-admin', 'root', 'second of acme-admin']);
    } finally {
      // Once its renders are done the process may have been stopped (only one is kept): nothing to resume then.
      if (renderWorkers().includes(frozen)) process.kill(frozen, 'SIGCONT');
    }
  });
});

describe('renders share a memory budget', () => {
  let t: TestApp;

  before(async () => {
    // Each render may use 4 GiB on its own, but all renders together only 300 MiB.
    t = await startTestApp({
      SIGNROOM_RENDER_MEMORY_MB: '4096',
      SIGNROOM_RENDER_TOTAL_MEMORY_MB: '300',
      SIGNROOM_RENDER_TIMEOUT_MS: '60000',
      SIGNROOM_RENDER_DEADLINE_MS: '120000',
    });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('stops the render that takes renders together past the budget, stores its document with the placeholder, and renders the next', async () => {
    // A content stream that inflates to 1.2 GB (of spaces), which the renderer holds whole.
    const pdf = contentStreamBomb();
    const bomb = await upload(t, pdf);
    assert.equal(bomb.statusCode, 201, bomb.body);
    assert.equal((await metadataOf(t, bomb.json().id)).thumbnail, 'placeholder');
    assert.equal(t.app.renderer.killed.memory, 1);
    const next = await upload(t, topHalfBlackPdf());
    assert.equal((await metadataOf(t, next.json().id)).thumbnail, 'rendered');
  });
});

describe('render time limit', () => {
  let t: TestApp;

  before(async () => {
    // The wall-clock deadline (by default the CPU limit and a second) set apart: this is about the CPU limit alone.
    t = await startTestApp({
      SIGNROOM_RENDER_TIMEOUT_MS: '1000',
      SIGNROOM_RENDER_DEADLINE_MS: '60000',
      SIGNROOM_RENDER_WORKERS: '1',
      SIGNROOM_RENDER_MAX_WORKERS: '1',
    });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('counts the CPU time a render uses, not the time it waits for the CPU', async () => {
    // Warm (a first upload starts the process), then frozen: as a render starved by other work would be.
    // Its wall time passes, its CPU time does not.
    assert.equal((await upload(t, topHalfBlackPdf())).statusCode, 201);
    const workers = renderWorkers();
    assert.equal(workers.length, 1);
    for (const pid of workers) process.kill(pid, 'SIGSTOP');
    const pending = upload(t, topHalfBlackPdf());
    await new Promise((resolve) => setTimeout(resolve, 1500));
    for (const pid of workers) process.kill(pid, 'SIGCONT');
    const response = await pending;
    assert.equal(response.statusCode, 201, response.body);
    assert.equal((await metadataOf(t, response.json().id)).thumbnail, 'rendered');
  });
});

describe('hostile PDFs under the default budget', () => {
  let t: TestApp;
  let pdfs: Record<string, Buffer>;

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    pdfs = await hostilePdfs();
  });
  after(async () => t.close());

  it('stores each with a thumbnail or the placeholder (the time to each answer is measured by npm run bench:upload)', async () => {
    const outcomes: Record<string, string> = {};
    for (const [name, pdf] of Object.entries(pdfs)) {
      const response = await upload(t, pdf);
      assert.equal(response.statusCode, 201, `${name}: ${response.body}`);
      outcomes[name] = (await metadataOf(t, response.json().id)).thumbnail;
    }
    // What a person must see is drawn: the scan and the huge page; the endless ones may end as placeholders.
    assert.equal(outcomes['scan600dpi'], 'rendered');
    assert.equal(outcomes['hugePage'], 'rendered');
    assert.equal((await t.app.inject({ url: '/livez' })).statusCode, 200);
  });

  it('draws the 600 dpi scan like poppler does', async () => {
    const response = await upload(t, pdfs['scan600dpi']!);
    const ours = Buffer.from(response.json().thumbnail.replace(/^data:image\/png;base64,/, ''), 'base64');
    const dir = mkdtempSync(path.join(tmpdir(), 'signroom-scan-'));
    try {
      writeFileSync(path.join(dir, 'scan.pdf'), pdfs['scan600dpi']!);
      const poppler = await popplerPage1(path.join(dir, 'scan.pdf'), 200);
      assert.ok(poppler !== undefined);
      const { difference, blank } = await compareWithPoppler(ours, poppler);
      assert.ok(!blank && difference <= FAITHFUL_DIFFERENCE, `difference ${difference.toFixed(3)}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
