import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';

/** Log bytes held while standard output does not take them (a stalled log reader): beyond, lines are dropped. */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

/**
 * Where the log goes when no stream is given: standard output, written asynchronously by pino's
 * writer (SonicBoom) 4 KiB or a tenth of a second at a time, and flushed when the process exits
 * (an uncaught error included): under load, the lines of many requests leave in one write. If
 * standard output stops taking lines (a stalled log collector), at most 16 MiB are held and
 * further lines are dropped, where a synchronous write would stop the whole server.
 */
export function standardOutputLog(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 100, maxLength: MAX_HELD_BYTES });
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

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A request's id in the log and in `X-Request-Id`: the client's own, if it sent a plain one, else a new UUID. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
