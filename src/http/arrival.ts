import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * What the answer replay (answer-replay.ts) learned of a request it looked at and passed on to the
 * framework: when it arrived (`performance.now()`), the token of the database's changes taken then
 * (caught up to that moment, before anything was read for it), and how long the replay held it
 * (waiting for reads under way, the changes' catch-up, a kept answer's renewal).
 */
interface Arrival {
  at: number;
  token: number | undefined;
  heldMs: number;
}

const arrivals = new WeakMap<IncomingMessage, Arrival>();

/** Records a request's arrival as it is passed on to the framework. */
export function recordArrival(request: IncomingMessage, at: number, token: number | undefined): void {
  arrivals.set(request, { at, token, heldMs: performance.now() - at });
}

/**
 * When a request passed on by the replay arrived: the moment its reads must be at least as new
 * as. The replay has caught the database's changes up to it already, so the framework's own
 * reads need no second catch-up (on PostgreSQL, a query to the listening connection).
 */
export function arrivedAt(request: IncomingMessage): number | undefined {
  return arrivals.get(request)?.at;
}

/** The database's change token taken when the request arrived (see recordArrival); undefined when it was not passed on by the replay. */
export function arrivalToken(request: IncomingMessage): number | undefined {
  return arrivals.get(request)?.token;
}

/** How long the replay held the request before the framework saw it, ms (0 when it did not). */
export function heldBeforeFramework(request: IncomingMessage): number {
  return arrivals.get(request)?.heldMs ?? 0;
}

/**
 * The time from a request's arrival to its answer, ms, for the log line, the metrics and the
 * slow-request log: the framework's own measure starts when it sees the request, after the time
 * the replay held it.
 */
export function elapsedSinceArrival(request: FastifyRequest, reply: FastifyReply): number {
  return reply.elapsedTime + heldBeforeFramework(request.raw);
}
