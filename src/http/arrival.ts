import type { IncomingMessage } from 'node:http';

/**
 * When a request arrived, as early as the server can vouch for it: what the
 * server keeps between requests serves it only if read since that moment.
 *
 * Requests read from sockets in one turn of the event loop were all received
 * before that turn's poll for I/O returned, so the moment the first of them is
 * parsed is a moment every one of them had arrived by. They share it, and with
 * it one reading of what changed in the database (SQLite's data_version, 3 µs
 * a request, 12% of the server's busy time under load). The moment is
 * forgotten at the end of the turn. Two exceptions may serve a request from a
 * reading up to one turn old: a turn's poll meeting more than 1,024 ready
 * connections at once reads sockets a second time; and a pipelined request
 * (sent before the previous answer on its connection) may be parsed before the
 * poll, when that answer's write completes, and set the moment for the turn.
 */
const ARRIVED = Symbol('signroom.arrived');
let thisTurn: number | undefined;

/** Marks a request read from a socket: call as it is parsed. */
export function markArrival(request: IncomingMessage): void {
  if (thisTurn === undefined) {
    thisTurn = performance.now();
    setImmediate(() => (thisTurn = undefined));
  }
  (request as IncomingMessage & { [ARRIVED]?: number })[ARRIVED] = thisTurn;
}

/** The moment a request arrived by: its turn's, or now for one not read from a socket (an injected request). */
export function arrivalOf(request: IncomingMessage): number {
  return (request as IncomingMessage & { [ARRIVED]?: number })[ARRIVED] ?? performance.now();
}
