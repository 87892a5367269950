import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
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
  return app;
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
            : (cause as Error).message;
    super(`cannot listen on ${config.host}:${config.port}: ${reason}`, { cause });
    this.name = 'ListenError';
  }
}
