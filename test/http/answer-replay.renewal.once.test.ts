/**
 * The answer replay's renewals at their edges (src/http/answer-replay.ts), over real HTTP with a
 * stand-in for the framework: a renewal the replay stops during, a renewal that stalls past its
 * wait, one that fails. The app-level behaviour (what is renewed and what goes to the framework
 * with the real lookup and credentials) is in answer-replay.test.ts.
 */
import type { ChangeSource } from '../../src/lib/change-scoped-cache.ts';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import type { FastifyReply, FastifyRequest } from 'fastify';
import pino from 'pino';
import { AnswerReplay, type Reauthorize } from '../../src/http/answer-replay.ts';
import { heldBeforeFramework } from '../../src/http/arrival.ts';
import { CapturedLog } from '../helpers/log.ts';

/** A promise and its resolve, for renewals that answer when the test says. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

/** A replaying server whose framework answers `{"framework":n}` and keeps it for replay, as the lookup route does. */
async function replayingStandIn(renewalWaitMs = 1_000) {
  let token = 1;
  const log = new CapturedLog();
  const state = {
    reauthorize: (async () => Date.now() + 60_000) as Reauthorize,
    answer: async (_asOf: number): Promise<Buffer> => Buffer.from('{"renewed":true}'),
    answerCalls: 0,
    /** Whether the framework's answers are kept for replay. */
    keeps: true,
    /** What the framework saw of each request passed on: the time the replay held it, ms. */
    passedOn: [] as { heldMs: number }[],
  };
  const replay = new AnswerReplay(
    tokenSource(() => token),
    (...args) => state.reauthorize(...args),
    pino({ level: 'info' }, log.stream),
    { renewalWaitMs },
  );
  const framework = (request: http.IncomingMessage, response: http.ServerResponse) => {
    state.passedOn.push({ heldMs: heldBeforeFramework(request) });
    const body = Buffer.from(`{"framework":${state.passedOn.length}}`);
    const fastifyRequest = { raw: request, authValidUntil: Date.now() + 60_000, routeOptions: { url: '/x' }, url: request.url, ip: '127.0.0.1' };
    replay.renewable(fastifyRequest as unknown as FastifyRequest, {
      orgId: 'acme',
      answer: (asOf) => {
        state.answerCalls += 1;
        return state.answer(asOf);
      },
    });
    const reply = { statusCode: 200, getHeaders: () => ({ 'content-type': 'application/json' }) };
    if (state.keeps) replay.replayable(fastifyRequest as unknown as FastifyRequest, reply as unknown as FastifyReply, body, () => {});
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(body);
  };
  const server = http.createServer(replay.handler(framework));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async () => (await fetch(`${base}/x`, { headers: { authorization: 'Basic YTpi' } })).text();
  return {
    state,
    replay,
    log,
    get,
    commit: () => (token += 1),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('answer replay renewals at their edges', () => {
  const closing: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closing) await close();
  });

  it('passes a request waiting for a renewal to the framework when the replay stops meanwhile', async () => {
    const t = await replayingStandIn();
    closing.push(t.close);
    assert.equal(await t.get(), '{"framework":1}');
    assert.equal(await t.get(), '{"framework":1}', 'replayed while nothing changed');
    t.commit();
    const slow = deferred<Buffer>();
    t.state.answer = () => slow.promise;
    const waiting = t.get();
    while (t.state.answerCalls === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    t.replay.stop();
    slow.resolve(Buffer.from('{"renewed":true}'));
    assert.equal(await waiting, '{"framework":2}', 'the framework answers once stopped (a server shutting down answers 503 and closes)');
  });

  it('sends requests to the framework once a renewal runs past its wait, counting the wait, and begins no other renewal meanwhile', async () => {
    const t = await replayingStandIn(60);
    closing.push(t.close);
    assert.equal(await t.get(), '{"framework":1}');
    t.commit();
    const stalled = deferred<Buffer>();
    t.state.answer = () => stalled.promise;
    assert.equal(await t.get(), '{"framework":2}', 'the renewal stalls: the framework answers after the wait');
    assert.equal(t.state.answerCalls, 1);
    assert.ok(t.state.passedOn[1]!.heldMs >= 50, `the time waited is the request's: held ${t.state.passedOn[1]!.heldMs} ms`);
    t.commit();
    assert.equal(await t.get(), '{"framework":3}', 'the framework answers at once while the first renewal still runs');
    assert.equal(t.state.answerCalls, 1, 'no second renewal piles up behind the stalled one');
    stalled.resolve(Buffer.from('{"renewed":true}'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    t.commit();
    t.state.answer = async () => Buffer.from('{"renewed":true}');
    assert.equal(await t.get(), '{"renewed":true}', 'once it settled, renewals resume');
    assert.equal(t.replay.renewed, 1);
  });

  it('begins at most one more renewal for a key while the first stalls, however many commits arrive within the wait', async () => {
    // A wait longer than the eight commits take (400 ms), however slow the machine is to send them.
    const t = await replayingStandIn(1_000);
    closing.push(t.close);
    assert.equal(await t.get(), '{"framework":1}');
    const stalled = deferred<Buffer>();
    t.state.answer = () => stalled.promise;
    // The stalled database: the framework's own answers are not kept meanwhile (they would stall too).
    t.state.keeps = false;
    const waiting: Promise<string>[] = [];
    for (let k = 0; k < 8; k++) {
      t.commit(); // another process commits every 50 ms
      waiting.push(t.get());
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(waiting);
    assert.equal(t.state.answerCalls, 2, 'renewals begun for the key while the first stalls');
    stalled.resolve(Buffer.from('{"renewed":true}'));
  });

  it('logs a renewal that fails otherwise than with the route’s problem, at most once a minute, and passes its requests on', async () => {
    const t = await replayingStandIn();
    closing.push(t.close);
    assert.equal(await t.get(), '{"framework":1}');
    t.state.answer = () => Promise.reject(new Error('connection reset'));
    t.commit();
    assert.equal(await t.get(), '{"framework":2}');
    t.commit();
    assert.equal(await t.get(), '{"framework":3}');
    const warnings = t.log.entries.filter((entry) => entry.level === 40);
    assert.equal(warnings.length, 1, 'the second failure within a minute is counted, not logged');
    assert.match(String((warnings[0]!['err'] as { message: string }).message), /connection reset/);
  });
});

function tokenSource(token: () => number | undefined): ChangeSource {
  const source: ChangeSource = { token, catchUp: () => undefined, about: () => source };
  return source;
}
