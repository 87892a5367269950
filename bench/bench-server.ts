/** Starting the server a benchmark measures. */
import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Starts `bin/signroom serve` on `port` with `env` (its errors go to this
 * process's stderr) and resolves once `/readyz` answers 200; stops it and
 * throws if it exits or does not come up within 20 s.
 */
export async function startSignroom(signroom: string, env: NodeJS.ProcessEnv, port: number): Promise<ChildProcess> {
  const child = spawn(signroom, ['serve'], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] });
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
