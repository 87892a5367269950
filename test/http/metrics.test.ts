/**
 * What the operator sees (issue 24): /metrics in Prometheus' text format behind its token, and one
 * structured log event for each placeholder thumbnail, killed render process and slow request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
// @ts-expect-error: the parser ships no types; it takes text and returns metric families.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { CapturedLog } from '../helpers/log.ts';
import { hostilePdfs, makePdf } from '../helpers/pdf.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const TOKEN = 'metrics-token-0123456789abcdef';
const UPLOAD = '/admin/api/v3/organizations/acme/rooms/board/documents';
const AUTH = basic('acme-admin', ACME_PASSWORD);

interface Family {
  name: string;
  type: string;
  metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string> }[];
}

const parse = parsePrometheusTextFormat as (text: string) => Family[];

function family(families: Family[], name: string): Family {
  const found = families.find((entry) => entry.name === name);
  assert.ok(found !== undefined, `${name} is exported`);
  return found;
}

function valueOf(found: Family, labels: Record<string, string>): number {
  const metric = found.metrics.find((entry) => Object.entries(labels).every(([key, value]) => entry.labels?.[key] === value));
  return metric === undefined ? 0 : Number(metric.value);
}

describe('metrics and operator logs', () => {
  let t: TestApp;
  const log = new CapturedLog();
  const events = (name: string) => log.events(name);
  before(async () => {
    t = await startTestApp({ SIGNROOM_METRICS_TOKEN: TOKEN, SIGNROOM_SLOW_REQUEST_MS: '1500', SIGNROOM_LOG_LEVEL: 'warn' }, undefined, log.stream);
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('refuses /metrics without its token, and serves Prometheus text with it', async () => {
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789abcd', AUTH]) {
      const refused = await t.app.inject({ url: '/metrics', headers: authorization === undefined ? {} : { authorization } });
      assert.equal(refused.statusCode, 401);
      assert.equal(refused.json().code, 'unauthorized');
    }
    for (let i = 0; i < 3; i++)
      assert.equal((await t.app.inject({ url: `${LOOKUP('acme', 'board')}?searchQuery=ann`, headers: { authorization: AUTH } })).statusCode, 200);
    assert.equal((await t.app.inject({ url: LOOKUP('acme', 'board') })).statusCode, 401);
    const scraped = await t.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(scraped.statusCode, 200);
    assert.match(String(scraped.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const families = parse(scraped.body);
    const route = '/admin/api/v3/organizations/:organizationId/rooms/:signingRoomId/signatories/lookup';
    const requests = family(families, 'signroom_http_requests_total');
    assert.equal(requests.type, 'COUNTER');
    assert.equal(valueOf(requests, { method: 'GET', route, status: '200' }), 3);
    assert.equal(valueOf(requests, { method: 'GET', route, status: '401' }), 1);
    const durations = family(families, 'signroom_http_request_duration_seconds');
    assert.equal(durations.type, 'HISTOGRAM');
    // The parser keeps a histogram's buckets (not its labels): every series has its +Inf bucket.
    assert.ok(durations.metrics.length > 0 && durations.metrics.every((metric) => metric.buckets?.['+Inf'] !== undefined));
    assert.equal(family(families, 'signroom_login_hash_queue').type, 'GAUGE');
    assert.equal(valueOf(family(families, 'signroom_login_hashes_total'), {}), 1, 'one hash: the credential is cached after the first request');
    assert.equal(family(families, 'signroom_search_indexes').type, 'GAUGE');
    assert.ok(families.some((entry) => entry.name === 'signroom_process_resident_memory_bytes'));
  });

  it('logs a placeholder thumbnail and the render process killed once each, and an upload past the slow-request limit as slow; counts them', async () => {
    const bomb = (await hostilePdfs())['decompressionBomb']!;
    const upload = (bytes: Buffer, name: string) =>
      t.app.inject({
        method: 'POST',
        url: UPLOAD,
        headers: { authorization: AUTH, 'content-type': 'application/json' },
        payload: { payload: bytes.toString('base64'), name },
      });
    // How long each upload took as the client saw it: the server's own measure is a little less.
    const took: number[] = [];
    const timedUpload = async (bytes: Buffer, name: string) => {
      const started = performance.now();
      const answer = await upload(bytes, name);
      took.push(performance.now() - started);
      return answer;
    };
    const stored = await timedUpload(bomb, 'bomb.pdf');
    assert.equal(stored.statusCode, 201, stored.body);
    assert.equal((await timedUpload(makePdf([{ width: 200, height: 200, content: '0 0 0 rg 0 0 100 100 re f' }]), 'fine.pdf')).statusCode, 201);

    const placeholders = events('thumbnail.placeholder');
    assert.equal(placeholders.length, 1);
    assert.equal(placeholders[0]?.['documentId'], stored.json().id);
    assert.match(String(placeholders[0]?.['reason']), /rendering (took|needed)/);
    const killed = events('render.killed');
    assert.equal(killed.length, 1);
    assert.ok(['deadline', 'time', 'memory'].includes(String(killed[0]?.['reason'])), String(killed[0]?.['reason']));
    // The bomb's render is stopped at its time limit (3 s), or sooner at its memory limit on a fast
    // machine: an upload is logged as slow exactly when it took 1.5 s or more on the server, which
    // is surely so past 1.6 s as the client saw it, and surely not under 1.5 s.
    const surelySlow = took.filter((ms) => ms >= 1600).length;
    const maybeSlow = took.filter((ms) => ms >= 1500).length;
    // Logged by an onResponse hook, which may run after inject has the answer: waited for, a second at most.
    for (let k = 0; k < 100 && events('request.slow').length < surelySlow; k++) await new Promise((resolve) => setTimeout(resolve, 10));
    const slow = events('request.slow');
    assert.ok(slow.length >= surelySlow && slow.length <= maybeSlow, `${JSON.stringify(slow)}, uploads took ${took.map(Math.round).join(', ')} ms`);
    for (const line of slow) {
      assert.equal(line['route'], '/admin/api/v3/organizations/:organizationId/rooms/:signingRoomId/documents');
      assert.ok(Number(line['ms']) >= 1500);
    }

    const families = parse((await t.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).body);
    const renders = family(families, 'signroom_renders_total');
    assert.equal(valueOf(renders, { outcome: 'placeholder' }), 1);
    assert.equal(valueOf(renders, { outcome: 'thumbnail' }), 1);
    const kills = family(families, 'signroom_render_processes_killed_total');
    assert.equal(
      kills.metrics.reduce((sum, metric) => sum + Number(metric.value), 0),
      1,
    );
  });
});

describe('metrics without a token', () => {
  it('still logs a slow answer, one the framework never saw (a replay) included', async () => {
    const log = new CapturedLog();
    const t = await startTestApp({ SIGNROOM_SLOW_REQUEST_MS: '1500', SIGNROOM_LOG_LEVEL: 'warn' }, undefined, log.stream);
    try {
      // What the answer replay reports for each answer it sends (src/http/answer-replay.ts).
      t.app.answerReplay.onReplayed?.('replayed-slowly', '/the/route', 200, 1.6);
      t.app.answerReplay.onReplayed?.('replayed-fast', '/the/route', 200, 0.002);
      const slow = log.events('request.slow');
      assert.deepEqual(
        slow.map((entry) => [entry['reqId'], entry['ms'], entry['method'], entry['route'], entry['status']]),
        [['replayed-slowly', 1600, 'GET', '/the/route', 200]],
      );
    } finally {
      await t.close();
    }
  });

  it('does not serve /metrics', async () => {
    const t = await startTestApp();
    try {
      const response = await t.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(response.statusCode, 404);
      assert.equal(response.json().code, 'route-not-found');
    } finally {
      await t.close();
    }
  });
});
