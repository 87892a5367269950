/**
 * Render processes start when an upload needs one and stop once idle (issue 23: the deployment's
 * memory at rest holds no render process). The real app, real processes: pids are read from /proc.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
// @ts-expect-error: the parser ships no types; it takes text and returns metric families.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { RenderPool } from '../../src/documents/render-pool.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { renderWorkers, upload } from '../helpers/render-processes.ts';
import { inspectPng } from '../helpers/images.ts';
import { topHalfBlackPdf } from '../helpers/pdf.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { waitUntil } from '../helpers/wait.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

/** Asserts the upload was stored with a thumbnail of topHalfBlackPdf's page 1. */
async function assertThumbnail(response: Awaited<ReturnType<typeof upload>>): Promise<void> {
  assert.equal(response.statusCode, 201, response.body);
  const match = /^data:image\/png;base64,([A-Za-z0-9+/]+=*)$/.exec(response.json().thumbnail);
  assert.ok(match, 'thumbnail is a PNG data URI');
  const png = await inspectPng(Buffer.from(match[1]!, 'base64'));
  assert.equal(png.width, 200);
  assert.ok(png.meanOf(0.05, 0.45) < 20, 'the top half is black');
  assert.ok(png.meanOf(0.55, 0.7) > 230, 'below it the page is white');
}

/** Waits (up to 20 s) until `done` holds. */
const waitFor = (what: string, done: () => boolean | Promise<boolean>) => waitUntil(what, done, { withinMs: 20_000, everyMs: 50 });

const gone = (pid: number) => !existsSync(`/proc/${pid}`);

/** The render process gauge and start counter, as /metrics exports them. */
async function renderMetrics(t: TestApp): Promise<{ processes: Record<string, number>; started: number }> {
  const scraped = await t.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(scraped.statusCode, 200);
  const families = (parsePrometheusTextFormat as (text: string) => { name: string; metrics: { value: string; labels?: Record<string, string> }[] }[])(
    scraped.body,
  );
  const gauge = families.find((entry) => entry.name === 'signroom_render_processes');
  const started = families.find((entry) => entry.name === 'signroom_render_processes_started_total');
  assert.ok(gauge !== undefined && started !== undefined, 'both are exported');
  return {
    processes: Object.fromEntries(gauge.metrics.map((metric) => [metric.labels?.['state'], Number(metric.value)])),
    started: Number(started.metrics[0]?.value),
  };
}

describe('render processes start when needed and stop when idle', () => {
  let t: TestApp;

  before(async () => {
    // Idle for 3 s: long enough that a slow machine still finds the process of an upload just answered.
    t = await startTestApp({ SIGNROOM_RENDER_IDLE_SECONDS: '3', SIGNROOM_METRICS_TOKEN: TOKEN });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('holds no render process at start, and is ready, saying so in /metrics', async () => {
    assert.deepEqual(renderWorkers(), []);
    const ready = await t.app.inject({ url: '/readyz' });
    assert.equal(ready.statusCode, 200, ready.body);
    assert.deepEqual(await renderMetrics(t), { processes: { starting: 0, idle: 0, busy: 0, stopping: 0 }, started: 0 });
  });

  let first: number;
  it('starts one process for the first upload, which gets its thumbnail', async () => {
    await assertThumbnail(await upload(t, topHalfBlackPdf()));
    const workers = renderWorkers();
    assert.equal(workers.length, 1, 'one upload, one process (not SIGNROOM_RENDER_WORKERS of them)');
    first = workers[0]!;
    assert.equal((await renderMetrics(t)).started, 1);
  });

  it('stops it once it has been idle for SIGNROOM_RENDER_IDLE_SECONDS', async () => {
    await waitFor('the idle process to exit', () => gone(first));
    assert.deepEqual(renderWorkers(), []);
    assert.equal((await t.app.inject({ url: '/readyz' })).statusCode, 200, 'no render process is still ready');
    assert.deepEqual((await renderMetrics(t)).processes, { starting: 0, idle: 0, busy: 0, stopping: 0 });
  });

  it('starts another for the next upload', async () => {
    await assertThumbnail(await upload(t, topHalfBlackPdf()));
    const workers = renderWorkers();
    assert.equal(workers.length, 1);
    assert.notEqual(workers[0], first);
    assert.equal((await renderMetrics(t)).started, 2);
  });

  it('serves an upload that arrives while the idle process is stopping', async () => {
    const [stopping] = renderWorkers();
    assert.ok(stopping !== undefined);
    // Frozen, it cannot act on the pool's SIGTERM: it stays "stopping" for as long as the test wants.
    process.kill(stopping, 'SIGSTOP');
    try {
      await waitFor('the pool to stop the idle process', () => t.app.renderer.processes.stopping === 1);
      await assertThumbnail(await upload(t, topHalfBlackPdf()));
      assert.ok(!gone(stopping), 'the upload was served while the old process had not exited');
      assert.equal(renderWorkers().length, 2);
    } finally {
      process.kill(stopping, 'SIGCONT');
    }
    await waitFor('the stopped process to exit', () => gone(stopping));
  });
});

describe('an upload waits for a stopping process when it holds the only place', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ SIGNROOM_RENDER_IDLE_SECONDS: '3', SIGNROOM_RENDER_WORKERS: '1', SIGNROOM_RENDER_MAX_WORKERS: '1' });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('starts a process once the stopping one has exited, and renders', async () => {
    await assertThumbnail(await upload(t, topHalfBlackPdf()));
    const [stopping] = renderWorkers();
    assert.ok(stopping !== undefined);
    process.kill(stopping, 'SIGSTOP');
    let pending: ReturnType<typeof upload> | undefined;
    try {
      await waitFor('the pool to stop the idle process', () => t.app.renderer.processes.stopping === 1);
      pending = upload(t, topHalfBlackPdf());
      await waitFor('the upload to wait for a render', () => t.app.renderer.waiting === 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(t.app.renderer.waiting, 1, 'it waits');
      assert.deepEqual(renderWorkers(), [stopping], 'no second process: SIGNROOM_RENDER_MAX_WORKERS is 1');
    } finally {
      process.kill(stopping, 'SIGCONT');
    }
    await assertThumbnail(await pending);
    assert.ok(gone(stopping));
  });
});

describe('render processes started only for renders that can run', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ SIGNROOM_RENDER_PER_UPLOADER: '1' });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it("starts none for an uploader's render that waits for its other one to end", async () => {
    const uploads = [upload(t, topHalfBlackPdf()), upload(t, topHalfBlackPdf())];
    for (const response of await Promise.all(uploads)) await assertThumbnail(response);
    assert.equal(t.app.renderer.started, 1, 'one process drew both, one after the other');
    assert.equal(renderWorkers().length, 1);
  });
});

describe('closing the render pool while a process starts', () => {
  it('stops the starting process and ends the waiting render', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'signroom-render-'));
    const pool = new RenderPool(loadConfig({ SIGNROOM_DATA_DIR: dir }).render);
    try {
      writeFileSync(path.join(dir, 'page.pdf'), topHalfBlackPdf());
      const pending = pool.render('application/pdf', path.join(dir, 'page.pdf'), 200);
      assert.equal(pool.processes.starting, 1);
      const [starting] = renderWorkers();
      assert.ok(starting !== undefined);
      await pool.close();
      assert.ok(gone(starting), 'the process that was warming up has exited');
      assert.deepEqual(await pending, { kind: 'unreadable', detail: 'the server is shutting down' });
      assert.deepEqual(renderWorkers(), []);
      assert.equal(pool.ready, false);
      await assert.rejects(pool.render('application/pdf', path.join(dir, 'page.pdf'), 200), /closed/);
      assert.deepEqual(renderWorkers(), [], 'a closed pool starts nothing');
    } finally {
      await pool.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SIGNROOM_RENDER_IDLE_SECONDS', () => {
  it('defaults to a minute, takes 0 to a day, and refuses anything else naming the variable', () => {
    assert.equal(loadConfig({}).render.idleMs, 60_000);
    assert.equal(loadConfig({ SIGNROOM_RENDER_IDLE_SECONDS: '0' }).render.idleMs, 0);
    assert.equal(loadConfig({ SIGNROOM_RENDER_IDLE_SECONDS: '86400' }).render.idleMs, 86_400_000);
    for (const value of ['soon', '-1', '1.5', '86401']) {
      assert.throws(
        () => loadConfig({ SIGNROOM_RENDER_IDLE_SECONDS: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === 'SIGNROOM_RENDER_IDLE_SECONDS',
      );
    }
  });
});
