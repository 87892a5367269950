import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';

/**
 * Where the log goes when no stream is given: standard output, written asynchronously, 4 KiB or a
 * quarter of a second at a time. Under load the lines of many requests leave in one write instead
 * of a write each; they are flushed when the process exits (also on an uncaught error), so only a
 * SIGKILL can lose the last lines.
 */
export function standardOutputLog(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 250 });
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
