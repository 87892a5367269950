/**
 * The load generator of the lookup, write and SCIM benchmarks: wrk (Debian's package, a C event
 * loop), one thread and 32 keep-alive connections by default, cycling through a list of paths
 * with one Authorization header (bench/wrk-paths.lua).
 *
 * Why not the Node.js generator the benchmarks used before (bench/load.ts, removed): sharing the
 * two cores of this machine with the server, it saturated at 15,000–20,000 req/s, below what a
 * bare node:http replay serves, so "signroom is N% of the bare replay" measured the generator.
 * wrk pushes the bare replay to 40,000+ req/s here (the lookup bench prints it each run).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface LoadResult {
  requests: number;
  /** Connection errors, timeouts and answers other than 2xx/3xx. */
  errors: number;
  rps: number;
  /** Latency percentiles and maximum, ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface LoadOptions {
  seconds: number;
  /** Keep-alive connections (32: what a busy reverse proxy holds open to one process). */
  connections?: number;
  authorization?: string;
}

const script = fileURLToPath(new URL('wrk-paths.lua', import.meta.url));
const WRK = '/usr/bin/wrk';

/** Installs wrk from Debian when it is missing (as root, as on the bench machine); throws with the command otherwise. */
export function ensureWrk(): string {
  if (existsSync(WRK)) return WRK;
  if (process.getuid?.() !== 0) throw new Error('wrk is missing: apt-get install wrk');
  process.stderr.write('installing wrk from Debian…\n');
  execFileSync('apt-get', ['install', '-y', '-q', 'wrk'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return WRK;
}

/** Drives `baseUrl` with the paths in turn for `seconds`; closed loop, one wrk thread. */
export async function wrkLoad(baseUrl: string, paths: readonly string[], options: LoadOptions): Promise<LoadResult> {
  const wrk = ensureWrk();
  const dir = mkdtempSync(path.join(tmpdir(), 'signroom-wrk-'));
  const pathsFile = path.join(dir, 'paths.txt');
  writeFileSync(pathsFile, `${paths.join('\n')}\n`);
  try {
    const args = [
      '-t1',
      `-c${options.connections ?? 32}`,
      `-d${options.seconds}s`,
      '--timeout',
      '10s',
      '-s',
      script,
      baseUrl,
      '--',
      pathsFile,
      options.authorization ?? '',
    ];
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn(wrk, args, { stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      child.stdout.on('data', (chunk) => (text += chunk));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}`))));
    });
    const line = out.trim().split('\n').at(-1) ?? '';
    const result = JSON.parse(line) as Omit<LoadResult, 'rps'> & { seconds: number };
    return {
      requests: result.requests,
      errors: result.errors,
      rps: result.requests / result.seconds,
      p50: result.p50,
      p90: result.p90,
      p99: result.p99,
      max: result.max,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
