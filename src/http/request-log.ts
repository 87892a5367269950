import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import { BatchedLineWriter } from '../lib/batched-line-writer.ts';
import { elapsedSinceArrival } from './arrival.ts';

/** Log bytes held while standard output does not take them (a stalled log reader): beyond, lines are dropped. */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

/**
 * Where the log goes when no stream is given: standard output, written asynchronously once per
 * turn of the event loop (BatchedLineWriter), and flushed when the process exits (an uncaught
 * error included): under load, the lines of many requests leave in one write. If standard output
 * stops taking lines (a stalled log collector), at most 16 MiB are held and further lines are
 * dropped, where a synchronous write would stop the whole server.
 */
export function standardOutputLog(): DestinationStream {
  // One writer per process: every app built without a stream of its own shares it (and its exit hook).
  standardOutput ??= new BatchedLineWriter(process.stdout, MAX_HELD_BYTES);
  return standardOutput;
}
let standardOutput: BatchedLineWriter | undefined;

/** Before a graceful exit: resolves once the log lines given to standard output are written, or after `withinMs`. */
export async function standardOutputLogDrained(withinMs: number): Promise<void> {
  await standardOutput?.drained(withinMs);
}

/**
 * One log line per request, once its answer is sent ("request completed": the request id,
 * method, URL, status and time), in place of Fastify's two (one when a request arrives with the
 * client's address and port, one when it ends). Fastify's other lines (errors, 404s, closing)
 * stay as they are. Measured on the lookup's cached answers: the pair cost about as much CPU as
 * the rest of the request (docs/benchmarks.md, "The lookup's hot path").
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = completedLine(request.method, request.url, reply.statusCode, elapsedSinceArrival(request, reply));
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}

/** What the "request completed" line says of a request, besides its id. */
export function completedLine(
  method: string,
  url: string,
  statusCode: number,
  ms: number,
): { method: string; url: string; statusCode: number; responseTime: number } {
  return { method, url, statusCode, responseTime: Math.round(ms * 10) / 10 };
}

/**
 * Writes the "request completed" line of a request answered without the framework (the answer
 * replay): the very JSON pino writes for `log.info({ reqId, ...completedLine(…) }, 'request
 * completed')` with the logger's bindings (pid, hostname), formatted here, straight to the
 * logger's stream. Why: pino's formatting took about 2 µs of the 17 a replayed answer costs
 * (docs/benchmarks.md, "The log line"). A logger whose lines are not pino's default
 * (see plainPinoLine) gets them from pino.
 */
export function completedLineWriter(log: FastifyBaseLogger): (reqId: string, method: string, url: string, statusCode: number, ms: number) => void {
  const plain = plainPinoLine(log);
  if (plain === undefined) {
    return (reqId, method, url, statusCode, ms) => log.info({ reqId, ...completedLine(method, url, statusCode, ms) }, 'request completed');
  }
  const { stream, bindings } = plain;
  const logger = log as unknown as pino.Logger;
  return (reqId, method, url, statusCode, ms) => {
    if (logger.levelVal > 30) return;
    stream.write(completedJson(Date.now(), bindings, reqId, method, url, statusCode, ms));
  };
}

/** The "request completed" line as pino writes it at level info (30) with epoch time. */
function completedJson(time: number, bindings: string, reqId: string, method: string, url: string, statusCode: number, ms: number): string {
  return (
    `{"level":30,"time":${time}${bindings},"reqId":${JSON.stringify(reqId)},"method":${JSON.stringify(method)},"url":${JSON.stringify(url)},` +
    `"statusCode":${statusCode},"responseTime":${Math.round(ms * 10) / 10},"msg":"request completed"}\n`
  );
}

/**
 * The stream and bindings (`,"pid":…,"hostname":"…"`) of a pino logger that writes the "request
 * completed" line exactly as completedJson does, undefined for any other. Checked once, through
 * pino's public `symbols`: the logger's own formatting of a sample line (quotes, backslashes,
 * non-ASCII) must equal ours, and no hook, mixin, prefix or multistream may change or route it.
 */
export function plainPinoLine(log: FastifyBaseLogger): { stream: { write(line: string): unknown }; bindings: string } | undefined {
  const held = log as unknown as Record<symbol, unknown>;
  const symbols = pino.symbols as unknown as Record<string, symbol>;
  const stream = held[pino.symbols.streamSym] as ({ write(line: string): unknown } & Record<symbol, unknown>) | undefined;
  const bindings = held[pino.symbols.chindingsSym];
  const hooks = held[pino.symbols.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined;
  const asJson = held[pino.symbols.asJsonSym] as ((obj: object, msg: string, level: number, time: string) => string) | undefined;
  if (typeof stream?.write !== 'function' || typeof bindings !== 'string' || typeof asJson !== 'function') return undefined;
  const unchanged =
    held[pino.symbols.timeSym] === pino.stdTimeFunctions.epochTime &&
    held[pino.symbols.mixinSym] === undefined &&
    held[symbols['msgPrefixSym']!] === undefined &&
    hooks?.logMethod === undefined &&
    hooks?.streamWrite === undefined &&
    stream[Symbol.for('pino.metadata')] !== true &&
    (log as unknown as pino.Logger).levels.values['info'] === 30;
  if (!unchanged) return undefined;
  const sample = { reqId: 'r"1\\é', method: 'GET', url: '/u?q="ä"&b=\\x', statusCode: 200, ms: 1.25 };
  const theirs = asJson.call(
    log,
    { reqId: sample.reqId, ...completedLine(sample.method, sample.url, sample.statusCode, sample.ms) },
    'request completed',
    30,
    ',"time":0',
  );
  const ours = completedJson(0, bindings, sample.reqId, sample.method, sample.url, sample.statusCode, sample.ms);
  return theirs === ours ? { stream, bindings } : undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A request's id in the log and in `X-Request-Id`: the client's own, if it sent a plain one, else a new UUID. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
