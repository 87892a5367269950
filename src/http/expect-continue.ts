import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/**
 * `Expect: 100-continue` answered when the body is wanted, as Go's net/http does it. Node.js
 * answers `100 Continue` the moment such a request's head arrives, so a client that asked first
 * (curl does for bodies over 1 MiB) was told to send an upload the server then refused from its
 * declared length (413), its credential (401) or its route (404). Now the request goes to the
 * handler as any other, and `100 Continue` is sent only when something starts reading its body
 * (a `data` or `readable` listener: Fastify's parsers, the upload's reader). A request refused
 * before that gets its final answer instead (RFC 9110 §10.1.1 allows either), and the client
 * need not send the body at all; what it sends anyway is read and dropped by the lingering close.
 */
export function continueWhenRead(server: Server): void {
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    const onListener = (event: string | symbol) => {
      if (event !== 'data' && event !== 'readable') return;
      request.off('newListener', onListener);
      if (!response.headersSent && !response.writableEnded) response.writeContinue();
    };
    request.on('newListener', onListener);
    server.emit('request', request, response);
  });
}
