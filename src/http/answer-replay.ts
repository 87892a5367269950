import { hash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { ChangeScopedCache, type ChangeSource } from '../lib/change-scoped-cache.ts';
import { afterPendingReads } from './after-pending-reads.ts';
import { completedLineWriter, requestId } from './request-log.ts';

/** What is replayed: the answer's bytes and headers (its own `X-Request-Id` aside), while the credential is sure to pass. */
interface KeptAnswer {
  body: Buffer;
  /** Header names and values, flat, as `writeHead` takes them. */
  headers: string[];
  /** The authenticator's clock, ms. */
  validUntil: number;
  /** The route's pattern, for the request metrics. */
  route: string;
}

/**
 * The bytes of answers kept at most, as for the lookup's own page cache: most bodies are the very
 * buffers it keeps, but one it has let go is held here until it goes here too.
 */
const KEPT_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * A request the replay looked at and passed on: when it arrived (`performance.now()`), and the
 * token of the database's changes taken then, caught up to that moment, before anything was read
 * for it.
 */
const arrivals = new WeakMap<IncomingMessage, { at: number; token: number | undefined }>();

/**
 * When a request passed on by the replay arrived: the moment its reads must be at least as new
 * as. The replay has caught the database's changes up to it already, so the framework's own
 * reads need no second catch-up (on PostgreSQL, a query to the listening connection).
 */
export function arrivedAt(request: IncomingMessage): number | undefined {
  return arrivals.get(request)?.at;
}

/**
 * Sends a GET's answer again, byte for byte, without running it through the framework: when the
 * same URL comes with the same Authorization header from the same client, the database has not
 * changed since the answer was computed (no commit by any process: SQLite's commit counter,
 * PostgreSQL's change notices, caught up to the request's arrival as every cache here is) and the
 * credential is sure to pass (its verification is still kept, see AuthOutcome's `validUntil`).
 * The request still gets its own id, in `X-Request-Id` and in its log line, and is counted in
 * the metrics.
 *
 * Why: a cached lookup answer spends most of its time in the framework (routing, hooks, query
 * validation, the Basic credential's parse and hash, the cache key): docs/benchmarks.md, "The
 * lookup's hot path". Only routes that opt in (`replayable`) are kept, and only their 200s.
 *
 * Keys hold no credential: each is a hash of the client, the header and the URL under a
 * per-process salt.
 */
export class AnswerReplay {
  readonly #changes: ChangeSource;
  readonly #answers: ChangeScopedCache<string, KeptAnswer>;
  readonly #log: FastifyBaseLogger;
  readonly #logCompleted: ReturnType<typeof completedLineWriter>;
  readonly #now: () => number;
  readonly #salt = randomBytes(32).toString('base64');
  #stopped = false;
  /** Called for each answer replayed (the request metrics, the slow-request log). */
  onReplayed: ((reqId: string, route: string, status: number, seconds: number) => void) | undefined;
  /** Answers replayed so far. */
  replayed = 0;

  constructor(changes: ChangeSource, log: FastifyBaseLogger, now: () => number = Date.now) {
    this.#changes = changes;
    // A small body may be a slice of a shared 8 KiB block, which it keeps alive: weighed as the block.
    this.#answers = new ChangeScopedCache(changes, KEPT_ANSWER_BYTES, (answer) => Math.max(answer.body.byteLength, answer.body.buffer.byteLength) + 512);
    this.#log = log;
    this.#logCompleted = completedLineWriter(log);
    this.#now = now;
  }

  /** From now on every request goes to the framework (shutting down: it answers 503 and closes connections). */
  stop(): void {
    this.#stopped = true;
    this.#answers.clear();
  }

  /** The server's request handler: a kept answer, or the request handed to `next` (the framework). */
  handler(next: (request: IncomingMessage, response: ServerResponse) => void): (request: IncomingMessage, response: ServerResponse) => void {
    return (request, response) => {
      if (request.method !== 'GET' || request.headers.authorization === undefined || this.#stopped) {
        next(request, response);
        return;
      }
      let passedOn = false;
      const passOn = () => {
        passedOn = true;
        next(request, response);
      };
      this.#replayOr(request, response, passOn).catch((error: unknown) => {
        this.#log.error({ err: error }, 'answer replay failed: the request goes to the framework');
        if (!passedOn && !response.headersSent) passOn();
      });
    };
  }

  async #replayOr(request: IncomingMessage, response: ServerResponse, passOn: () => void): Promise<void> {
    const arrivedAt = performance.now();
    await afterPendingReads();
    const caughtUp = this.#changes.catchUp(arrivedAt);
    if (caughtUp !== undefined) await caughtUp;
    const token = this.#answers.token(arrivedAt);
    const kept = token === undefined || this.#stopped ? undefined : this.#answers.get(this.#key(request), arrivedAt);
    if (kept === undefined || kept.validUntil <= this.#now() || request.destroyed) {
      arrivals.set(request, { at: arrivedAt, token });
      passOn();
      return;
    }
    const id = requestId(request);
    response.writeHead(200, ['x-request-id', id, ...kept.headers]);
    response.end(kept.body);
    this.replayed += 1;
    const ms = performance.now() - arrivedAt;
    this.#logCompleted(id, 'GET', request.url ?? '', 200, ms);
    this.onReplayed?.(id, kept.route, 200, ms / 1000);
  }

  /**
   * A route's onSend hook that keeps its 200 answers for replay: last among the onSend hooks
   * (route hooks run after the app's), so the headers are those sent.
   */
  readonly replayable = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void => {
    const token = arrivals.get(request.raw)?.token;
    const validUntil = request.authValidUntil;
    if (token !== undefined && validUntil !== undefined && reply.statusCode === 200 && Buffer.isBuffer(payload) && !this.#stopped) {
      this.#answers.set(
        this.#key(request.raw),
        { body: payload, headers: sentHeaders(reply.getHeaders(), payload.length), validUntil, route: request.routeOptions.url ?? request.url },
        token,
      );
    }
    done(null, payload);
  };

  /** The client (its address and, behind a proxy, what the proxy says of it), the credential and the URL, hashed. */
  #key(request: IncomingMessage): string {
    const forwarded = request.headers['x-forwarded-for'] ?? '';
    return hash(
      'sha256',
      `${this.#salt}\n${request.socket.remoteAddress ?? ''}\n${String(forwarded)}\n${request.headers.authorization ?? ''}\n${request.url ?? ''}`,
      'base64',
    );
  }
}

/** The headers a reply set, flat for writeHead, without its request id (each request has its own), with the body's length. */
function sentHeaders(headers: Record<string, string | number | string[] | undefined>, length: number): string[] {
  const flat: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name === 'x-request-id' || name === 'content-length' || value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) flat.push(name, String(one));
  }
  flat.push('content-length', String(length));
  return flat;
}

/**
 * An HTTP server like the one Fastify makes (its `serverFactory`), whose requests meet the
 * replay first. `options` are Fastify's, defaults applied.
 */
export function replayingServer(
  replay: () => AnswerReplay | undefined,
  next: (request: IncomingMessage, response: ServerResponse) => void,
  options: { http?: http.ServerOptions; keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number; maxRequestsPerSocket: number },
): http.Server {
  let handler: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  const server = http.createServer(options.http ?? {}, (request, response) => {
    handler ??= replay()?.handler(next);
    (handler ?? next)(request, response);
  });
  server.keepAliveTimeout = options.keepAliveTimeout;
  server.requestTimeout = options.requestTimeout;
  server.setTimeout(options.connectionTimeout);
  if (options.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = options.maxRequestsPerSocket;
  return server;
}
