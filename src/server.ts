import { createServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { anyoneCanSignIn } from './repositories/credential-repository.ts';
import { standardOutputLogDrained } from './http/request-log.ts';
import type { Config } from './config.ts';

/** Starts listening and closes gracefully on SIGTERM/SIGINT: in-flight requests finish first. */
export async function serve(config: Config): Promise<FastifyInstance> {
  const app = await buildApp(config);
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
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    // Nothing may keep the process alive after a failed start (render workers, database).
    await app.close();
    throw new ListenError(config, error);
  }
  // A fresh install answers every request 401: say how to get in.
  if (!(await anyoneCanSignIn(app.database.db).catch(() => true))) {
    app.log.warn(
      "no credential or API token yet, so every request is refused: create one with `bin/signroom credential set NAME '*'` (or start once with --demo)",
    );
  }
  return app;
}

/**
 * Throws ListenError unless the server's address can be listened on now: `serve --demo` asks
 * before it loads the demo, which would otherwise reset the demo organization of the server
 * already running there and then fail to start.
 */
export async function assertCanListen(config: Config): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host: config.host, port: config.port, exclusive: true }, resolve);
    });
  } catch (error) {
    throw new ListenError(config, error);
  } finally {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  }
}

/** The server could not listen: the port is taken, the address is not ours, and so on. */
export class ListenError extends Error {
  constructor(config: Config, cause: unknown) {
    const code = (cause as NodeJS.ErrnoException).code;
    const reason =
      code === 'EADDRINUSE'
        ? 'the port is already in use (stop the other process or set PORT)'
        : code === 'EADDRNOTAVAIL'
          ? "the address is not one of this machine's (set HOST)"
          : code === 'EACCES'
            ? 'permission denied (ports below 1024 need privileges; set PORT)'
            : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
              ? 'no such host (set HOST to an address or name of this machine)'
              : (cause as Error).message;
    super(`cannot listen on ${config.host}:${config.port}: ${reason}`, { cause });
    this.name = 'ListenError';
  }
}
