import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RequestTimeouts } from '../config.ts';
import { sendProblem } from './problem-handlers.ts';
import { heldBeforeFramework } from './arrival.ts';

/**
 * The Node.js server options that bound the phases Node itself reads: the headers, and the
 * whole request as a backstop. Node checks its connections once a second for them.
 */
export function serverTimeoutOptions(timeouts: RequestTimeouts): {
  requestTimeout: number;
  http: { headersTimeout: number; connectionsCheckingInterval: number };
} {
  return { requestTimeout: timeouts.requestMs, http: { headersTimeout: timeouts.headersMs, connectionsCheckingInterval: 1_000 } };
}

/** Whether the request announces a body (a Content-Length above zero, or a chunked one). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}

/**
 * Bounds the two phases of a request that Node does not: the body, which must keep arriving at
 * a minimum rate (a stalled or trickling upload is answered 408 and its connection closed, which
 * frees what was read of it), and the handler, which must answer within its limit (503).
 */
export function installRequestDeadlines(app: FastifyInstance, timeouts: RequestTimeouts): void {
  const minBytesPerWindow = Math.max(1, Math.floor((timeouts.minBodyBytesPerSecond * timeouts.bodyWindowMs) / 1000));

  app.addHook('onRequest', (request, reply, done) => {
    if (hasBody(request) && !request.raw.complete) watchBody(request, reply, timeouts.bodyWindowMs, minBytesPerWindow, timeouts.minBodyBytesPerSecond);
    done();
  });

  // Handlers running, with their deadlines: one sweep checks them all, rather than a timer per
  // request on the lookup's hot path. A deadline is kept within a third of the limit.
  const running = new Map<FastifyRequest, { reply: FastifyReply; deadline: number }>();
  const sweep = setInterval(
    () => {
      const now = performance.now();
      // An aborted request is dropped here too, at its deadline (answerSlowHandler then does nothing).
      for (const [request, { reply, deadline }] of running) {
        if (deadline > now) continue;
        running.delete(request);
        answerSlowHandler(request, reply, timeouts.handlerMs);
      }
    },
    Math.max(10, Math.min(1000, Math.floor(timeouts.handlerMs / 3))),
  );
  sweep.unref();
  app.addHook('onClose', async () => clearInterval(sweep));
  app.addHook('preHandler', (request, reply, done) => {
    // The time the answer replay held the request (waiting for a renewal) counts.
    running.set(request, { reply, deadline: performance.now() + timeouts.handlerMs - heldBeforeFramework(request.raw) });
    done();
  });
  app.addHook('onResponse', (request, _reply, done) => {
    running.delete(request);
    done();
  });
}

/** Checks, once a window, that the body brought enough bytes since the last check; stops once it is complete. */
function watchBody(request: FastifyRequest, reply: FastifyReply, windowMs: number, minBytes: number, minRate: number): void {
  const socket = request.raw.socket;
  let lastRead = socket.bytesRead;
  const timer = setInterval(() => {
    if (request.raw.complete || socket.destroyed || reply.sent) {
      clearInterval(timer);
      return;
    }
    const read = socket.bytesRead;
    if (read - lastRead >= minBytes) {
      lastRead = read;
      return;
    }
    clearInterval(timer);
    request.log.warn({ event: 'request.body-too-slow', bytesInWindow: read - lastRead, windowMs }, 'request body stalled: answered 408 and closed');
    answerAndClose(request, reply, `The request body arrived slower than ${minRate} bytes per second; send it again.`);
  }, windowMs);
  timer.unref();
  request.raw.once('close', () => clearInterval(timer));
}

function answerSlowHandler(request: FastifyRequest, reply: FastifyReply, handlerMs: number): void {
  if (reply.sent || request.raw.socket.destroyed) return;
  request.log.warn({ event: 'request.handler-too-slow', handlerMs }, 'request took longer than its limit: answered 503');
  sendProblem(
    reply,
    'service-unavailable',
    `The server did not finish this request within ${handlerMs / 1000} s; a change it makes may still complete. Try again shortly.`,
    {
      headers: { 'retry-after': '5' },
    },
  );
}

/** A 408 while the body is still expected: the connection closes after it, dropping the rest of the body and what was read of it. */
function answerAndClose(request: FastifyRequest, reply: FastifyReply, detail: string): void {
  if (reply.sent || reply.raw.headersSent) {
    request.raw.socket.destroy();
    return;
  }
  reply.raw.once('finish', () => request.raw.socket.destroy());
  sendProblem(reply, 'request-timeout', detail, { headers: { connection: 'close' } });
}
