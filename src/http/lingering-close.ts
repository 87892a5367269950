import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How long, at most, a connection closed after an early answer goes on reading what its client still sends (nginx's `lingering_time`). */
export const LINGER_TOTAL_MS = 30_000;
/** How long it waits for more of it before closing anyway (nginx's `lingering_timeout`). */
export const LINGER_IDLE_MS = 5_000;

/**
 * Lingering close, as nginx does it. An answer that closes its connection before
 * the request's body has all arrived (a 413 from the declared length, a body
 * refused halfway) would, closed at once, leave the rest of the body unread in
 * the kernel, which then resets the connection: a client still sending (curl,
 * Python `requests`, `fetch`) meets a broken pipe or a reset instead of reading
 * the answer. So such a connection sends the answer and its end, then reads and
 * discards what the client still sends, until the body is over, the client
 * closes, nothing came for LINGER_IDLE_MS or LINGER_TOTAL_MS have passed.
 * Answers to complete requests close as Node closes them.
 *
 * Returns what ends every lingering connection at once and lingers no more (for shutdown).
 */
export function closeLingering(server: Server): () => void {
  const lingering = new Set<Socket>();
  /** The request whose answer was finished last on each connection (not the newest parsed: one may be pipelined behind it). */
  const answered = new WeakMap<Socket, IncomingMessage>();
  let stopped = false;
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    // Ahead of Node's own 'finish' listener, which is what calls destroySoon.
    response.prependOnceListener('finish', () => answered.set(request.socket, request));
  });
  server.on('connection', (socket: Socket) => {
    const destroySoon = socket.destroySoon.bind(socket);
    // Node's server calls destroySoon once an answer that ends its connection has been written.
    socket.destroySoon = () => {
      const request = answered.get(socket);
      if (stopped || request === undefined || request.complete || socket.destroyed) {
        destroySoon();
        return;
      }
      linger(socket, request, lingering);
    };
  });
  return () => {
    stopped = true;
    for (const socket of lingering) socket.destroy();
  };
}

function linger(socket: Socket, request: IncomingMessage, lingering: Set<Socket>): void {
  lingering.add(socket);
  const stop = () => socket.destroy();
  // Once nothing more will come, the connection closes as soon as the answer is out.
  const over = () => {
    if (socket.writableFinished) stop();
    else socket.once('finish', stop);
  };
  const total = setTimeout(stop, LINGER_TOTAL_MS);
  // Judged by the bytes the connection reads: Node's parser gives a dumped request's body to no one.
  let read = socket.bytesRead;
  const idle = setInterval(() => {
    if (socket.bytesRead === read) stop();
    read = socket.bytesRead;
  }, LINGER_IDLE_MS);
  socket.once('close', () => {
    clearTimeout(total);
    clearInterval(idle);
    lingering.delete(socket);
  });
  // Node's server reads the rest of the body off the wire and drops it (the request is dumped
  // once its answer is sent, or was left flowing by a body reader that gave up).
  request.once('end', over);
  socket.once('end', over);
  request.resume();
  // The answer, then our end of the connection; the client's end stays open for the rest of its body.
  socket.end();
}
