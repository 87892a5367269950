import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Authenticator } from '../auth/authenticator.ts';
import type { RenderPool } from '../documents/render-pool.ts';
import type { AnswerReplay } from './answer-replay.ts';
import { sendProblem } from './problem-handlers.ts';
import { elapsedSinceArrival } from './arrival.ts';

/** What /metrics reads from the rest of the service when it is scraped. */
export interface MetricSources {
  authenticator: Authenticator;
  renderer: RenderPool;
  searchIndexes: () => { organizations: number; loading: number };
  replay: Pick<AnswerReplay, 'replayed' | 'renewed' | 'passedOn'>;
}

export interface MetricsOptions {
  /** The Bearer token /metrics asks for; without one, /metrics is not served. */
  token: string | undefined;
  /** Requests that take longer are logged as slow. */
  slowRequestMs: number;
}

/**
 * Observes one request answered without the framework (AnswerReplay): counted like the others
 * when metrics are on, and logged when slow (a replay waits for the database's changes first).
 */
export type RequestObserver = (reqId: string, method: string, route: string, status: number, seconds: number) => void;

/**
 * Logs slow requests and, when a token is configured, counts every request by route and status
 * and serves the counts and the service's state in Prometheus' text format at `GET /metrics`.
 * Each app has a registry of its own.
 */
export function installMetrics(app: FastifyInstance, options: MetricsOptions, sources: MetricSources): RequestObserver {
  const logSlowElsewhere: RequestObserver = (reqId, method, route, status, seconds) => {
    if (seconds * 1000 >= options.slowRequestMs) app.log.warn({ reqId, ...slowLine(seconds * 1000, method, route, status) }, 'slow request');
  };
  // Without a token nothing is counted: only slow requests are logged.
  if (options.token === undefined) {
    app.addHook('onResponse', (request, reply, done) => {
      const ms = elapsedSinceArrival(request, reply);
      if (ms >= options.slowRequestMs) logSlow(request, reply, ms);
      done();
    });
    return logSlowElsewhere;
  }
  const registry = new Registry();
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'signroom_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'signroom_http_request_duration_seconds',
    help: 'Time from the request to the answer, by route and status',
    labelNames,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const count = (method: string, route: string, status: number, seconds: number) => {
    const labels = { method, route, status: String(status) };
    requests.inc(labels);
    durations.observe(labels, seconds);
  };
  app.addHook('onResponse', (request, reply, done) => {
    const ms = elapsedSinceArrival(request, reply);
    count(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, ms / 1000);
    if (ms >= options.slowRequestMs) logSlow(request, reply, ms);
    done();
  });

  const expected = Buffer.from(`Bearer ${options.token}`);
  registerServiceMetrics(registry, sources);
  collectDefaultMetrics({ register: registry, prefix: 'signroom_' });
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return sendProblem(reply, 'unauthorized', 'GET /metrics needs the token set in SIGNROOM_METRICS_TOKEN (Authorization: Bearer).', {
        headers: { 'www-authenticate': 'Bearer realm="signroom-metrics"' },
      });
    }
    return reply
      .header('content-type', registry.contentType)
      .header('cache-control', 'no-store')
      .send(await registry.metrics());
  });
  return (reqId, method, route, status, seconds) => {
    count(method, route, status, seconds);
    logSlowElsewhere(reqId, method, route, status, seconds);
  };
}

function logSlow(request: FastifyRequest, reply: FastifyReply, ms: number): void {
  request.log.warn(slowLine(ms, request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode), 'slow request');
}

/** What the "slow request" line says of a request, besides its id. */
function slowLine(ms: number, method: string, route: string, status: number) {
  return { event: 'request.slow', ms: Math.round(ms), method, route, status };
}

/** The service's own state, read when /metrics is scraped. */
function registerServiceMetrics(registry: Registry, { authenticator, renderer, searchIndexes, replay }: MetricSources): void {
  new Counter({
    name: 'signroom_renders_total',
    help: 'Thumbnail renders ended, by outcome (placeholder: stored without a drawing of page 1)',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [outcome, count] of Object.entries(renderer.outcomes)) this.inc({ outcome }, count);
    },
  });
  new Counter({
    name: 'signroom_render_processes_killed_total',
    help: 'Render processes killed before they answered, by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of Object.entries(renderer.killed)) this.inc({ reason }, count);
    },
  });
  new Gauge({
    name: 'signroom_render_processes',
    help: 'Render processes now, by state (starting: warming up; stopping: not yet exited); none until an upload needs one, and none once idle',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      for (const [state, count] of Object.entries(renderer.processes)) this.set({ state }, count);
    },
  });
  new Gauge({
    name: 'signroom_renders_waiting',
    help: 'Renders waiting for a render process: for one to start and warm up, or behind other renders',
    registers: [registry],
    collect() {
      this.set(renderer.waiting);
    },
  });
  new Counter({
    name: 'signroom_render_processes_started_total',
    help: 'Render processes started: each warms up before it renders, while an upload may wait for it',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(renderer.started);
    },
  });
  new Counter({
    name: 'signroom_login_hashes_total',
    help: 'Password hashes computed (unknown usernames compute none)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(authenticator.hashesComputed);
    },
  });
  new Gauge({
    name: 'signroom_login_hash_queue',
    help: 'Password hashes running and waiting now',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const { running, queued } = authenticator.hashQueue;
      this.set({ state: 'running' }, running);
      this.set({ state: 'queued' }, queued);
    },
  });
  new Counter({
    name: 'signroom_replayed_answers_total',
    help: 'GET answers sent again without the framework while the database had not changed, or once renewed after it changed',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(replay.replayed);
    },
  });
  new Counter({
    name: 'signroom_renewed_answers_total',
    help: 'Kept GET answers computed again without the framework after the database changed (each then replayed to the requests that waited for it)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(replay.renewed);
    },
  });
  new Counter({
    name: 'signroom_replay_passed_on_total',
    help: 'GETs the answer replay handed to the framework, by reason (not_kept: no answer kept for them; not_renewed: a kept answer that could not be renewed in time)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ reason: 'not_kept' }, replay.passedOn.notKept);
      this.inc({ reason: 'not_renewed' }, replay.passedOn.notRenewed);
    },
  });
  new Gauge({
    name: 'signroom_search_indexes',
    help: 'In-memory search indexes: organizations loaded, and loads queued or running',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const { organizations, loading } = searchIndexes();
      this.set({ state: 'loaded' }, organizations);
      this.set({ state: 'loading' }, loading);
    },
  });
}
