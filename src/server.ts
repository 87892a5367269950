import { createServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { standardOutputLogDrained } from './http/request-log.ts';
import type { Config } from './config.ts';

/** An address held for the server (see reserveAddress). */
export interface Reservation {
  release(): Promise<void>;
}

/**
 * Starts listening and closes gracefully on SIGTERM/SIGINT: in-flight requests finish first.
 * `reserved`: the address held for it until it listens (released whatever happens).
 */
export async function serve(config: Config, reserved?: Reservation): Promise<FastifyInstance> {
  let app: FastifyInstance;
  try {
    app = await buildApp(config);
  } catch (error) {
    await reserved?.release();
    throw error;
  }
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    app.close().then(
      // The log's last lines (a reader that lags may still hold some), at most a second more.
      () => standardOutputLogDrained(1000).then(() => process.exit(0)),
      (error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  try {
    await reserved?.release();
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    // Nothing may keep the process alive after a failed start (render workers, database).
    await app.close();
    throw new ListenError(config, error);
  }
  return app;
}

/**
 * Listens on the server's address and holds it until released, or throws ListenError: `serve
 * --demo` holds it while it loads the demo, which would otherwise reset the demo organization of
 * a server already running there (or one started meanwhile) and then fail to start. A host name
 * is held at the address it looks up first, as the server listens on.
 */
export async function reserveAddress(config: Config): Promise<Reservation> {
  const held = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      held.once('error', reject);
      held.listen({ host: config.host, port: config.port, exclusive: true }, resolve);
    });
  } catch (error) {
    throw new ListenError(config, error);
  }
  let released: Promise<void> | undefined;
  return { release: () => (released ??= new Promise<void>((resolve) => held.close(() => resolve()))) };
}

/** Why a listen failed, in words an operator acts on, by the error's code. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is already in use (stop the other process or set PORT)',
  EADDRNOTAVAIL: "the address is not one of this machine's (set HOST)",
  EACCES: 'permission denied (ports below 1024 need privileges; set PORT)',
  ENOTFOUND: 'no such host (set HOST to an address or name of this machine)',
  EAI_AGAIN: 'the host name could not be looked up now (is a name server reachable? HOST may be an address)',
};

/** The server could not listen: the port is taken, the address is not ours, and so on. */
export class ListenError extends Error {
  constructor(config: Config, cause: unknown) {
    const code = (cause as NodeJS.ErrnoException).code;
    const reason = (code !== undefined ? LISTEN_FAILURES[code] : undefined) ?? (cause as Error).message;
    super(`cannot listen on ${config.host}:${config.port}: ${reason}`, { cause });
    this.name = 'ListenError';
  }
}
