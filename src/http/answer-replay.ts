import { hash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { ChangeSource } from '../lib/change-scoped-cache.ts';
import { LruCache } from '../lib/lru-cache.ts';
import { SharedWork } from '../lib/shared-work.ts';
import { ProblemError } from '../errors.ts';
import { afterPendingReads } from './after-pending-reads.ts';
import { arrivalToken, recordArrival } from './arrival.ts';
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
  /** The database's change token the answer was computed (or renewed) under: replayed as it is while the token stays. */
  token: number;
  /** The client's address as the framework saw it (failed logins are counted per address). */
  address: string;
  /** How the route computes it again once the database changed; none: the framework answers then. */
  renewal: Renewal | undefined;
}

/** How a route's answer is computed again, without the framework, after the database changed (see AnswerReplay.renewable). */
export interface Renewal {
  /** The organization the route acts on: the credential must cover it still. */
  orgId: string;
  /** The route's 200 answer now, as new as `asOf` (`performance.now()`); rejects when the route would answer otherwise. */
  answer: (asOf: number) => Promise<Buffer>;
}

/**
 * Whether the Authorization header passes still, from this client and for this organization, as
 * new as `asOf`, without a password hash or a write (Authenticator.recheck): until when, or
 * undefined for "ask the framework".
 */
export type Reauthorize = (header: string, address: string, orgId: string, asOf: number) => Promise<number | undefined>;

/**
 * The bytes of answers kept at most, as for the lookup's own page cache: most bodies are the very
 * buffers it keeps, but one it has let go is held here until it goes here too.
 */
const KEPT_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * Requests wait this long at most for a kept answer's renewal (counted from the renewal's start),
 * then go to the framework, whose handler deadline counts the time waited (see arrival.ts).
 */
const RENEWAL_WAIT_MS = 1_000;

/**
 * Renewals of one key running at once, at most: under steady writes a renewal may still run when
 * the next commit lands (one more may begin, for the newer token); beyond, or once one has run past
 * its wait, requests go to the framework, so a stalled database does not gather one renewal per
 * commit. Beside 200 writes/s on PostgreSQL, one at a time sent so many requests to the framework
 * that the mix fell by about a quarter (7,380 and 8,331 req/s with two, 6,902 and 4,477 with one).
 */
const RENEWALS_PER_KEY = 2;

/** A renewal that fails otherwise than with the route's own problem answer is logged at most this often. */
const RENEWAL_FAILURE_LOG_MS = 60_000;

/** How the answer of a request being answered by the framework is computed again (see AnswerReplay.renewable). */
const renewals = new WeakMap<IncomingMessage, Renewal>();

/**
 * Sends a GET's answer again, byte for byte, without running it through the framework: when the
 * same URL comes with the same Authorization header from the same client, the database has not
 * changed since the answer was computed (no commit by any process: SQLite's commit counter,
 * PostgreSQL's change notices, caught up to the request's arrival as every cache here is) and the
 * credential is sure to pass (its verification is still kept, see AuthOutcome's `validUntil`).
 * The request still gets its own id, in `X-Request-Id` and in its log line, and is counted in
 * the metrics.
 *
 * Once the database changed, an answer whose route said how (`renewable`) is renewed rather than
 * dropped: the credential checked again (`Reauthorize`: its row and failed logins read again, no
 * hash) and the route's answer computed again (the lookup: mostly from its own caches, which keep
 * what a write cannot touch), for all the requests with that key arriving meanwhile at once. So
 * steady writes elsewhere in the directory do not send every lookup through the framework after
 * every commit (docs/benchmarks.md, "Lookups beside writes").
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
  readonly #answers: LruCache<string, KeptAnswer>;
  readonly #reauthorize: Reauthorize;
  readonly #log: FastifyBaseLogger;
  readonly #logCompleted: ReturnType<typeof completedLineWriter>;
  readonly #now: () => number;
  readonly #renewalWaitMs: number;
  /** Renewals under way, by key, each under the change token it was asked under: requests arriving meanwhile share it. */
  readonly #renewing = new SharedWork<string, KeptAnswer | undefined>();
  /** Each renewal raced against its wait (RENEWAL_WAIT_MS), once for all the requests waiting on it. */
  readonly #inTime = new WeakMap<Promise<KeptAnswer | undefined>, Promise<KeptAnswer | undefined>>();
  readonly #salt = randomBytes(32).toString('base64');
  #stopped = false;
  /** When a failed renewal was last logged (performance.now()), and how many failed since. */
  #renewalFailures = { loggedAt: -Infinity, unlogged: 0 };
  /** Called for each answer replayed (the request metrics, the slow-request log). */
  onReplayed: ((reqId: string, route: string, status: number, seconds: number) => void) | undefined;
  /** Answers replayed so far (renewed ones included). */
  replayed = 0;
  /** Answers computed again without the framework after the database changed, and kept (each replayed to every request that waited on it). */
  renewed = 0;
  /** GETs handed to the framework: with no answer kept for them, or with one that could not be renewed (in time). */
  readonly passedOn = { notKept: 0, notRenewed: 0 };

  /** `now`: the authenticator's clock; `renewalWaitMs`: the most a request waits for a renewal (at most RENEWAL_WAIT_MS). */
  constructor(
    changes: ChangeSource,
    reauthorize: Reauthorize,
    log: FastifyBaseLogger,
    options: { now?: (() => number) | undefined; renewalWaitMs?: number } = {},
  ) {
    this.#changes = changes;
    this.#reauthorize = reauthorize;
    // A small body may be a slice of a shared 8 KiB block, which it keeps alive: weighed as the block.
    this.#answers = new LruCache(KEPT_ANSWER_BYTES, (answer) => Math.max(answer.body.byteLength, answer.body.buffer.byteLength) + 512);
    this.#log = log;
    this.#logCompleted = completedLineWriter(log);
    this.#now = options.now ?? Date.now;
    this.#renewalWaitMs = Math.min(RENEWAL_WAIT_MS, options.renewalWaitMs ?? RENEWAL_WAIT_MS);
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
    // Hashed while the catch-up (on PostgreSQL, a round trip) is out.
    const key = this.#key(request);
    if (caughtUp !== undefined) await caughtUp;
    const token = this.#changes.token(arrivedAt);
    let kept = token === undefined || this.#stopped ? undefined : this.#answers.get(key);
    const wasKept = kept !== undefined;
    if (kept !== undefined && (kept.token !== token || kept.validUntil <= this.#now())) kept = await this.#renewed(key, kept, token!, arrivedAt, request);
    // Stopped while waiting: the framework answers (503, closing the connection).
    if (kept === undefined || this.#stopped || request.destroyed) {
      this.passedOn[wasKept ? 'notRenewed' : 'notKept'] += 1;
      recordArrival(request, arrivedAt, token);
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
   * The kept answer computed again under `token` (one renewal for every request of the key meanwhile),
   * or undefined (and forgotten) when it cannot be: no renewal, the credential not sure to pass
   * without the framework, or the route answering otherwise than 200.
   */
  #renewed(key: string, kept: KeptAnswer, token: number, asOf: number, request: IncomingMessage): Promise<KeptAnswer | undefined> {
    const { renewal } = kept;
    const header = request.headers.authorization;
    if (renewal === undefined || header === undefined) {
      this.#answers.delete(key);
      return Promise.resolve(undefined);
    }
    // Renewals under older tokens still running (a slow or stalled database): the framework answers
    // this one, so they do not pile up.
    if (this.#renewing.shared(key, token) === undefined && this.#renewalsBusy(key)) return Promise.resolve(undefined);
    const renewing = this.#renewing.run(key, token, () => this.#renew(key, kept, renewal, header, token, asOf));
    let inTime = this.#inTime.get(renewing);
    if (inTime === undefined) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), this.#renewalWaitMs);
        timer.unref();
      });
      inTime = Promise.race([renewing, late]).finally(() => clearTimeout(timer));
      this.#inTime.set(renewing, inTime);
    }
    return inTime;
  }

  /** Whether no other renewal of the key may begin: as many as RENEWALS_PER_KEY run, or one has run past its wait. */
  #renewalsBusy(key: string): boolean {
    const since = this.#renewing.busySince(key);
    return since !== undefined && (this.#renewing.running(key) >= RENEWALS_PER_KEY || performance.now() - since >= this.#renewalWaitMs);
  }

  /** The kept answer computed again under `token`, kept in its place; undefined (and forgotten) when it cannot be. */
  async #renew(key: string, kept: KeptAnswer, renewal: Renewal, header: string, token: number, asOf: number): Promise<KeptAnswer | undefined> {
    let renewed: KeptAnswer | undefined;
    try {
      const validUntil = await this.#reauthorize(header, kept.address, renewal.orgId, asOf);
      if (validUntil !== undefined && validUntil > this.#now()) {
        const body = await renewal.answer(asOf);
        // Bodies are the lookup's own kept buffers: an answer no change touched is the very same one.
        const headers = body === kept.body || body.equals(kept.body) ? kept.headers : withLength(kept.headers, body.length);
        renewed = { ...kept, body, headers, validUntil, token };
      }
    } catch (error) {
      // The route answering otherwise (a room deleted: its 404) is the framework's to send; anything else is logged.
      if (!(error instanceof ProblemError)) this.#renewalFailed(error);
    }
    // Kept in its place unless the framework has kept a newer answer meanwhile (after a renewal past its wait).
    if (this.#answers.get(key) === kept) {
      if (renewed === undefined || this.#stopped) this.#answers.delete(key);
      else {
        this.#answers.set(key, renewed);
        this.renewed += 1;
      }
    }
    return renewed;
  }

  /** Logs a failed renewal (the request goes to the framework, which answers or logs it too), at most once a minute. */
  #renewalFailed(error: unknown): void {
    const failures = this.#renewalFailures;
    const now = performance.now();
    if (now - failures.loggedAt < RENEWAL_FAILURE_LOG_MS) {
      failures.unlogged += 1;
      return;
    }
    this.#log.warn({ err: error, failedUnlogged: failures.unlogged }, 'answer replay: a kept answer could not be renewed; its requests go to the framework');
    this.#renewalFailures = { loggedAt: now, unlogged: 0 };
  }

  /** Says how the route computes this request's answer again once the database changed (call before it is sent). */
  renewable(request: FastifyRequest, renewal: Renewal): void {
    renewals.set(request.raw, renewal);
  }

  /**
   * A route's onSend hook that keeps its 200 answers for replay: last among the onSend hooks
   * (route hooks run after the app's), so the headers are those sent.
   */
  readonly replayable = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void => {
    const token = arrivalToken(request.raw);
    const validUntil = request.authValidUntil;
    if (token !== undefined && validUntil !== undefined && reply.statusCode === 200 && Buffer.isBuffer(payload) && !this.#stopped) {
      this.#answers.set(this.#key(request.raw), {
        body: payload,
        headers: sentHeaders(reply.getHeaders(), payload.length),
        validUntil,
        route: request.routeOptions.url ?? request.url,
        token,
        address: request.ip,
        renewal: renewals.get(request.raw),
      });
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

/** Kept headers with another body's length. */
function withLength(headers: readonly string[], length: number): string[] {
  const renewed = [...headers];
  for (let k = 0; k < renewed.length; k += 2) if (renewed[k] === 'content-length') renewed[k + 1] = String(length);
  return renewed;
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
