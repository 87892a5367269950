import { once } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a server (PostgreSQL here) that a test can cut and
 * restore, to play a database that goes away and comes back.
 */
export class CuttableProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  /** Starts forwarding (on the same port as before, after a cut). */
  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.#target);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (typeof address === 'object' && address !== null) this.port = address.port;
    this.#server = server;
  }

  /** Drops every connection and stops listening: new connections are refused. */
  async cut(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

/**
 * A server that speaks just enough of PostgreSQL's protocol to refuse every
 * login with the given SQLSTATE and message, as a server with password
 * authentication would (the test cluster trusts every local login).
 */
export async function refusingPostgres(code: string, message: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => {
      const fields = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', code), field('M', message), Buffer.from([0])]);
      const header = Buffer.alloc(5);
      header.write('E', 0, 'latin1');
      header.writeInt32BE(fields.length + 4, 1);
      socket.end(Buffer.concat([header, fields]));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function field(type: string, value: string): Buffer {
  return Buffer.concat([Buffer.from(type, 'latin1'), Buffer.from(value, 'utf8'), Buffer.from([0])]);
}
