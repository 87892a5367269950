import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { RawBuilder } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { freshDatabase } from './databases.ts';
import { freshDataDir } from './test-app.ts';

export const SIGNROOM = fileURLToPath(new URL('../../bin/signroom', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs bin/signroom as a user would, with the given environment added. */
export function runCli(args: string[], env: Record<string, string>, options: { cwd?: string; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(SIGNROOM, args, { env: { ...process.env, ...env }, cwd: options.cwd ?? process.cwd() });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/**
 * Runs bin/signroom at a terminal of its own (util-linux `script` makes the pseudo-terminal),
 * answering each prompt that ends with ": " in turn with the next of `answers` once it is shown;
 * what the terminal showed (both streams, as a user sees them) and the exit status.
 */
export function runCliAtTerminal(args: string[], env: Record<string, string>, answers: string[]): Promise<{ code: number | null; screen: string }> {
  const quoted = [SIGNROOM, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', quoted, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
    let screen = '';
    let answered = 0;
    let answeredAt = 0;
    child.stdout.on('data', (chunk) => {
      screen += chunk;
      // A prompt is shown: the screen ends with one, new since the last answer.
      if (screen.endsWith(': ') && screen.length > answeredAt && answered < answers.length) {
        answeredAt = screen.length;
        child.stdin.write(`${answers[answered++]}\r`);
      }
    });
    // A prompt not answered (one more than expected) must not hang the suite.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new Error("these tests need util-linux's `script` (Debian: bsdutils) to run bin/signroom at a terminal") : error),
    );
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, screen: screen.replaceAll('\r\n', '\n') });
    });
  });
}

/** Starts `bin/signroom serve` and resolves once it answers /livez. */
export async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(SIGNROOM, ['serve'], { env: { ...process.env, ...env } });
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const url = `http://${env['HOST'] ?? '127.0.0.1'}:${env['PORT']}`;
  // A minute: two servers starting at once on a slow machine, or one recovering after a kill, take a while.
  for (const began = performance.now(); performance.now() - began < 60_000;) {
    if (child.exitCode !== null) throw new Error(`server exited early: ${output}`);
    try {
      if ((await fetch(`${url}/livez`)).ok) return { child, url, output: () => output };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`server did not start: ${output}`);
}

/** A TCP port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** A data directory and a fresh database of the run's dialect, for tests that run bin/signroom. */
export interface CliWorkspace {
  dataDir: string;
  /** SIGNROOM_DATA_DIR, and DATABASE_URL on PostgreSQL. */
  env: Record<string, string>;
  /** Runs SQL on the workspace's database, as an operator would; several statements share one connection, the last one's rows are returned. */
  sql<R>(...queries: [...RawBuilder<unknown>[], RawBuilder<R>]): Promise<R[]>;
  close(): Promise<void>;
}

export async function cliWorkspace(): Promise<CliWorkspace> {
  const dataDir = freshDataDir();
  const database = await freshDatabase();
  const env = { SIGNROOM_DATA_DIR: dataDir, ...database.env };
  return {
    dataDir,
    env,
    async sql<R>(...queries: RawBuilder<unknown>[]) {
      const handle = openDatabase(loadConfig(env));
      try {
        return await handle.db.connection().execute(async (connection) => {
          let rows: unknown[] = [];
          for (const query of queries) rows = (await query.execute(connection)).rows;
          return rows as R[];
        });
      } finally {
        await handle.close();
      }
    },
    async close() {
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
