import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';

/** Lines kept before they are handed to the writer together, in characters. */
const BATCH_CHARS = 16_384;
/** The longest a line waits for others (a quiet server's lines appear this late at most). */
const BATCH_MS = 100;

/**
 * Where the log goes when no stream is given: standard output, lines gathered in memory and handed
 * to pino's asynchronous writer (SonicBoom: partial writes, a full pipe, the flush at exit) 16 KiB
 * or a tenth of a second at a time. A line handed to SonicBoom one by one cost about three times
 * what it costs gathered (docs/benchmarks.md, "The lookup's hot path"). What is still gathered is
 * written when the process exits (also on an uncaught error), so only a SIGKILL can lose the last
 * tenth of a second of lines.
 */
export function standardOutputLog(): DestinationStream {
  return new GatheredLines(pino.destination({ dest: 1, sync: false }));
}

/** pino's asynchronous writer (SonicBoom). */
type Writer = ReturnType<typeof pino.destination>;

class GatheredLines implements DestinationStream {
  readonly #writer: Writer;
  #lines: string[] = [];
  #chars = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(writer: Writer) {
    this.#writer = writer;
    process.on('exit', () => {
      this.#handOver();
      this.#writer.flushSync();
    });
  }

  write(line: string): void {
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= BATCH_CHARS) this.#handOver();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.#handOver(), BATCH_MS);
      this.#timer.unref();
    }
  }

  #handOver(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#lines.length === 0) return;
    this.#writer.write(this.#lines.join(''));
    this.#lines = [];
    this.#chars = 0;
  }
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
