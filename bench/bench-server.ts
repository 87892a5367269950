/** Starting the server a benchmark measures. */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';

/**
 * Starts `bin/signroom serve` on `port` with `env` (its errors go to this
 * process's stderr) and resolves once `/readyz` answers 200; stops it and
 * throws if it exits or does not come up within 20 s.
 */
export async function startSignroom(signroom: string, env: NodeJS.ProcessEnv, port: number): Promise<ChildProcess> {
  // With SIGNROOM_BENCH_LOGS (a folder), each server's log is kept there as server-<port>.log, at
  // SIGNROOM_BENCH_LOG_LEVEL when given (its index updates and merges are logged at info).
  const logs = process.env['SIGNROOM_BENCH_LOGS'];
  const level = process.env['SIGNROOM_BENCH_LOG_LEVEL'];
  const out = logs === undefined ? 'ignore' : openSync(path.join(logs, `server-${port}.log`), 'a');
  const child = spawn(signroom, ['serve'], {
    env: { ...env, PORT: String(port), ...(level !== undefined ? { SIGNROOM_LOG_LEVEL: level } : {}) },
    stdio: ['ignore', out, 'inherit'],
  });
  if (typeof out === 'number') closeSync(out);
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) throw new Error('the server exited');
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return child;
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGTERM');
  throw new Error('the server did not come up');
}

/** Stops a server started by startSignroom and waits for it to exit. */
export async function stopSignroom(server: ChildProcess): Promise<void> {
  // Already exited (with a code, or by a signal): no 'exit' event is coming.
  const exited = server.exitCode !== null || server.signalCode !== null ? Promise.resolve() : once(server, 'exit');
  server.kill('SIGTERM');
  await exited;
}
