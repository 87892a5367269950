import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import { BatchedLineWriter } from '../lib/batched-line-writer.ts';

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
  return new BatchedLineWriter(process.stdout, MAX_HELD_BYTES);
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
    const line = completedLine(request.method, request.url, reply.statusCode, reply.elapsedTime);
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
 * (docs/benchmarks.md, "The lookup's hot path"). A logger whose lines are not pino's default
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
    stream.write(
      `{"level":30,"time":${Date.now()}${bindings},"reqId":${JSON.stringify(reqId)},"method":${JSON.stringify(method)},"url":${JSON.stringify(url)},` +
        `"statusCode":${statusCode},"responseTime":${Math.round(ms * 10) / 10},"msg":"request completed"}\n`,
    );
  };
}

/**
 * The stream and bindings (`,"pid":…,"hostname":"…"`) of a pino logger whose lines are pino's
 * default: numeric levels, epoch time, `msg`, no mixin or prefix (the app's logger); undefined
 * for any other. Read through pino's public `symbols`.
 */
export function plainPinoLine(log: FastifyBaseLogger): { stream: { write(line: string): unknown }; bindings: string } | undefined {
  const held = log as unknown as Record<symbol, unknown>;
  const stream = held[pino.symbols.streamSym] as { write(line: string): unknown } | undefined;
  const bindings = held[pino.symbols.chindingsSym];
  const plain =
    held[pino.symbols.timeSym] === pino.stdTimeFunctions.epochTime &&
    held[pino.symbols.messageKeySym] === 'msg' &&
    held[pino.symbols.mixinSym] === undefined &&
    held[(pino.symbols as unknown as Record<string, symbol>)['msgPrefixSym']!] === undefined &&
    (log as unknown as pino.Logger).levels.values['info'] === 30;
  return plain && typeof stream?.write === 'function' && typeof bindings === 'string' ? { stream, bindings } : undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A request's id in the log and in `X-Request-Id`: the client's own, if it sent a plain one, else a new UUID. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
