/**
 * A small closed-loop HTTP load generator, run as its own process:
 *   node bench/load.ts <baseUrl> <urls.json> <connections> <seconds> [authorization]
 * Prints one JSON line: requests, errors, rps and latency percentiles in ms.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [baseUrl, urlsFile, connectionsText, secondsText, authorization] = process.argv.slice(2);
if (baseUrl === undefined || urlsFile === undefined) throw new Error('usage: load.ts baseUrl urls.json connections seconds [auth]');
const paths = JSON.parse(readFileSync(urlsFile, 'utf8')) as string[];
const connections = Number(connectionsText ?? 16);
const seconds = Number(secondsText ?? 10);
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const target = new URL(baseUrl);
const headers = authorization !== undefined ? { authorization } : {};

function request(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: target.hostname, port: target.port, path, agent, headers }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const latencies: number[] = [];
let errors = 0;
let next = 0;
const deadline = performance.now() + seconds * 1000;

async function worker(): Promise<void> {
  while (performance.now() < deadline) {
    const path = paths[next++ % paths.length]!;
    const started = performance.now();
    try {
      const status = await request(path);
      if (status !== 200) errors++;
    } catch {
      errors++;
    }
    latencies.push(performance.now() - started);
  }
}

const started = performance.now();
await Promise.all(Array.from({ length: connections }, worker));
const elapsed = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
console.log(
  JSON.stringify({
    requests: latencies.length,
    errors,
    rps: latencies.length / elapsed,
    p50: pct(50),
    p90: pct(90),
    p99: pct(99),
    max: latencies[latencies.length - 1] ?? 0,
  }),
);
agent.destroy();
