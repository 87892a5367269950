/**
 * Lookup benchmark: signroom against a bare node:http server replaying the same
 * response bytes, measured in the same run on the same machine.
 *
 *   npm run bench -- [--users 100000] [--seconds 10] [--connections 32] [--rounds 2] [--dialect sqlite|postgres]
 *
 * Generates an organization of N users (5% external, 15% pending) with rooms of
 * 5,000 and 100,000 members (at most N/20 and N/10), imports it with bin/signroom, serves it with
 * bin/signroom serve, and drives both servers with wrk (bench/wrk.ts), in turns.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchDatabase } from './bench-database.ts';
import { BENCH_BASIC, lookupMix, writeBenchDirectory } from './bench-directory.ts';
import { deploymentMemory } from './process-memory.ts';
import { wrkLoad, type LoadResult } from './wrk.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '2' },
    dialect: { type: 'string', default: 'sqlite' },
  },
});
if (values.dialect !== 'sqlite' && values.dialect !== 'postgres') throw new Error('--dialect is sqlite or postgres');
const users = Number(values.users);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
/** Rounds of load per server, taken in turns (signroom, bare, signroom, bare…); each server's best counts. */
const rounds = Math.max(1, Number(values.rounds));

const root = fileURLToPath(new URL('..', import.meta.url));
const node = process.execPath;
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-'));
const database = await benchDatabase(values.dialect);
const env = { ...process.env, ...database.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };

function run(command: string, args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...env, ...extraEnv } });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => process.stderr.write(chunk));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}`))));
  });
}

async function waitFor(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: server exited`);
    try {
      await fetch(url);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error(`${url} did not come up`);
}

const log = (message: string) => process.stderr.write(`${message}\n`);

/** Waits until /readyz reports no search index load waiting or running (false: none was loaded). */
async function searchIndexesLoaded(port: number, child: ChildProcess): Promise<boolean> {
  for (;;) {
    if (child.exitCode !== null) throw new Error('server exited');
    const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { searchIndexes?: { organizations: number; loading: number } };
    if (ready.searchIndexes !== undefined && ready.searchIndexes.loading === 0) return ready.searchIndexes.organizations > 0;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

log(`generating ${users} users…`);
const file = path.join(dataDir, 'directory.json');
const organization = writeBenchDirectory(file, users);
/** Writes an import file of the sample organization giving only `users` (rooms and the rest stay as they are). */
function writeImportFile(name: string, users: object[]): string {
  const importFile = path.join(dataDir, name);
  writeFileSync(importFile, JSON.stringify({ organizations: [{ id: 'bench', name: 'bench (sample)', users }] }));
  return importFile;
}
/** A later import of the same organization: 1,000 users renamed and 1,000 new. */
const CHANGED = Math.min(1_000, Math.floor(users / 10));
const changeFile = writeImportFile('change.json', [
  ...organization.users.slice(0, CHANGED).map((user) => ({ ...user, lastname: `${user.lastname ?? ''}-Quist` })),
  ...organization.users.slice(CHANGED, 2 * CHANGED).map((user, k) => ({ ...user, id: `new${k}`, email: `new.${k}@bench.example` })),
]);
/**
 * A later import renaming more users than a server may lay over the index it holds (8,000, see
 * IMPORT_COPY_AFTER): the import leaves a copy of the index, which the server takes.
 */
const RENAMED = Math.min(20_000, Math.floor(users / 5));
const renameFile = writeImportFile(
  'rename.json',
  organization.users.slice(2 * CHANGED, 2 * CHANGED + RENAMED).map((user) => ({ ...user, lastname: `${user.lastname ?? ''}-Lund` })),
);
organization.users = [];
let started = performance.now();
await run(signroom, ['import', file]);
const importSeconds = (performance.now() - started) / 1000;
log(`imported in ${importSeconds.toFixed(1)} s`);

const base = '/admin/api/v3/organizations/bench/rooms';
const urls = lookupMix(base);
const bigPage = [`${base}/small/signatories/lookup`];
/** Measured once each, uncached, beside the URLs above: terms of 3 characters or more, from rare to in every user ("example"). */
const moreTerms = [
  ...['dub', 'ros', 'jen', 'garc', 'smith', 'ben', 'example', 'xyz', 'sil jen'].map(
    (term, index) =>
      `${base}/${index % 2 === 0 ? 'small' : 'large'}/signatories/lookup?size=20&searchQuery=${encodeURIComponent(term)}&sortBy=${['lastname', 'firstname', 'email'][index % 3]}`,
  ),
  // Every purpose with a common term in the room of 100,000 members (issue 23: 255–661 ms once).
  ...['SIGNATORY_INVITATION', 'SIGNING_REQUEST_SIGNATORY', 'PERMISSION_INVITATION'].flatMap((purpose, index) =>
    ['ann', 'mar'].map(
      (term) => `${base}/large/signatories/lookup?size=20&purpose=${purpose}&searchQuery=${term}&sortBy=${['lastname', 'firstname', 'email'][index % 3]}`,
    ),
  ),
];
/** Measured once each, uncached: terms too short for the trigram index. */
const shortTerms = [`${base}/large/signatories/lookup?size=20&searchQuery=ng`, `${base}/small/signatories/lookup?size=20&searchQuery=q`];
/** Measured once each: hostile queries (10,000 characters as one term and as 5,000 terms; 2,000 `%` terms), a guard against pathological plans. */
const hostileTerms = [
  'a'.repeat(10_000),
  Array.from({ length: 5000 }, (_, i) => `t${i}`)
    .join(' ')
    .slice(0, 10_000),
  // Percent-encoded three times over: 4,000 characters make a 12 KB URL, inside Node's 16 KiB limit for the request head (longer is 414).
  '% '.repeat(2000),
].map((term) => `${base}/small/signatories/lookup?size=20&searchQuery=${encodeURIComponent(term)}`);

const port = 18080;
/**
 * The server as deployed: the default log level (a line per request), its standard output a pipe
 * read as a log collector would (not a file, not /dev/null).
 */
const serve = () => {
  const child = spawn(signroom, ['serve'], { env: { ...env, PORT: String(port), SIGNROOM_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'] });
  child.stdout.resume();
  return child;
};
let server = serve();
const baselinePort = 18081;
let baseline: ChildProcess | undefined;
try {
  await waitFor(`http://127.0.0.1:${port}/livez`, server);
  // The first request with a credential pays the slow password hash: not part of any lookup's figure.
  await (await fetch(`http://127.0.0.1:${port}${base}/no-such-room/signatories/lookup`, { headers: { authorization: BENCH_BASIC } })).text();
  // The server loads the in-memory search index of a large organization in the background; until
  // it is loaded, lookups with terms are answered by the database (measured here first).
  const indexStarted = performance.now();
  const beforeIndex: number[] = [];
  for (const url of [`${base}/small/signatories/lookup?size=20&searchQuery=sch`, `${base}/large/signatories/lookup?size=20&searchQuery=ov`]) {
    started = performance.now();
    await (await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } })).text();
    beforeIndex.push(performance.now() - started);
  }
  const indexSeconds = (await searchIndexesLoaded(port, server)) ? (performance.now() - indexStarted) / 1000 : undefined;

  // First-seen queries: the count is not cached yet.
  const firstSeen: number[] = [];
  const firstSeenUrls: string[] = [];
  const recorded: Record<string, { contentType: string; body: string }> = {};
  for (const url of [...urls, ...bigPage]) {
    started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
    const body = await response.text();
    firstSeen.push(performance.now() - started);
    firstSeenUrls.push(url);
    if (response.status !== 200) throw new Error(`${url}: ${response.status} ${body}`);
    recorded[url] = { contentType: response.headers.get('content-type') ?? 'application/json', body };
  }
  for (const url of moreTerms) {
    started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
    await response.text();
    if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
    firstSeen.push(performance.now() - started);
    firstSeenUrls.push(url);
  }
  const shortSeen: number[] = [];
  for (const url of shortTerms) {
    started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
    await response.text();
    shortSeen.push(performance.now() - started);
  }
  const hostileSeen: number[] = [];
  for (const url of hostileTerms) {
    started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
    await response.text();
    if (response.status !== 200) throw new Error(`a long query: ${response.status}`);
    hostileSeen.push(performance.now() - started);
  }
  // Deep pages, uncached: how the time of one page grows with its offset (no query, large room, by email).
  const deepPages: { page: number; ms: number }[] = [];
  const lastPage = Math.max(0, Math.ceil(users / 20) - 1);
  for (const page of [0, 10, 100, 1_000, 10_000, Math.floor(lastPage / 2), lastPage].filter((p, i, all) => p <= lastPage && all.indexOf(p) === i)) {
    const url = `${base}/large/signatories/lookup?size=20&sortBy=email&page=${page}`;
    started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
    await response.text();
    if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
    deepPages.push({ page, ms: performance.now() - started });
  }
  const responsesFile = path.join(dataDir, 'responses.json');
  writeFileSync(responsesFile, JSON.stringify(recorded));
  baseline = spawn(node, [path.join(root, 'bench/replay-server.ts'), responsesFile, String(baselinePort)], { stdio: 'ignore' });
  await waitFor(`http://127.0.0.1:${baselinePort}/`, baseline);

  const load = (port: number, list: string[]) => wrkLoad(`http://127.0.0.1:${port}`, list, { seconds, connections, authorization: BENCH_BASIC });
  /** The deployment's memory (the server and its child processes, proportional set size) sampled during the page-20 load. */
  let memoryUnderLoad: { pssMiB: number; processes: number } | undefined;

  const rows: string[] = [];
  const roundLines: string[] = [];
  const row = (name: string, r: LoadResult, ratio: string) =>
    rows.push(`| ${name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p90.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.errors} | ${ratio} |`);
  for (const [name, list] of [
    ['page of 20, mixed queries', urls],
    ['page of 2000, no query', bigPage],
  ] as const) {
    // In turns, so a slower spell of this shared machine falls on both servers alike.
    const ourRounds: LoadResult[] = [];
    const bareRounds: LoadResult[] = [];
    for (let round = 0; round < rounds; round++) {
      const sampled = new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 2)).then(() => deploymentMemory(server.pid!));
      ourRounds.push(await load(port, list));
      const memory = await sampled;
      if (list === urls && (memoryUnderLoad === undefined || memory.pssMiB > memoryUnderLoad.pssMiB)) memoryUnderLoad = memory;
      bareRounds.push(await load(baselinePort, list));
    }
    const best = (results: typeof ourRounds) => results.reduce((a, b) => (b.rps > a.rps ? b : a));
    const ours = best(ourRounds);
    const bare = best(bareRounds);
    roundLines.push(
      `${name}: signroom ${ourRounds.map((r) => r.rps.toFixed(0)).join(', ')} req/s; bare ${bareRounds.map((r) => r.rps.toFixed(0)).join(', ')} req/s`,
    );
    row(`signroom: ${name}`, ours, `${((ours.rps / bare.rps) * 100).toFixed(0)}% of bare`);
    row(`bare node:http replay: ${name}`, bare, '100%');
  }

  const sortedFirst = [...firstSeen].sort((a, b) => a - b);
  console.log(`\nLookup benchmark: ${users} users, ${connections} connections, ${seconds} s per run, Node ${process.version}`);
  console.log(
    `database: ${values.dialect}; import of the directory file: ${importSeconds.toFixed(1)} s; ` +
      `deployment memory under the page-20 load (proportional set size, the server and its ${memoryUnderLoad!.processes - 1} child processes): ${memoryUnderLoad!.pssMiB.toFixed(0)} MiB`,
  );
  console.log(
    `in-memory search index: ${indexSeconds === undefined ? 'none (organization below SIGNROOM_SEARCH_MIN_USERS)' : `held ${indexSeconds.toFixed(1)} s after the server listened`}; ` +
      `meanwhile, first-seen "sch" and "ov" (answered by the database until the index is held): ${beforeIndex.map((ms) => ms.toFixed(1)).join(', ')} ms`,
  );
  console.log(
    `first-seen (uncached count) lookups, ${firstSeen.length} of them: median ${sortedFirst[Math.floor(sortedFirst.length / 2)]!.toFixed(1)} ms, max ${sortedFirst.at(-1)!.toFixed(1)} ms; 1–2 character terms: ${shortSeen.map((ms) => ms.toFixed(1)).join(', ')} ms; hostile long queries: ${hostileSeen.map((ms) => ms.toFixed(1)).join(', ')} ms\n`,
  );
  const slowest = firstSeen
    .map((ms, i) => ({ ms, url: firstSeenUrls[i]!.slice(base.length) }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 3);
  console.log(`slowest first-seen: ${slowest.map((s) => `${s.url} ${s.ms.toFixed(1)} ms`).join('; ')}`);
  console.log(`deep pages of 20 (uncached, sorted by email): ${deepPages.map((d) => `page ${d.page}: ${d.ms.toFixed(1)} ms`).join(', ')}\n`);
  console.log(`rounds, in turns (the best of each server is in the table): ${roundLines.join('; ')}\n`);
  // Change imports while the server runs: how long lookups with terms wait for the index again.
  const importWhileServing = async (label: string, importFile: string) => {
    started = performance.now();
    await run(signroom, ['import', importFile]);
    const importedIn = (performance.now() - started) / 1000;
    const imported = performance.now();
    const afterChange: { at: number; ms: number }[] = [];
    for (let k = 0; performance.now() - imported < 3000; k++) {
      const url = `${base}/${k % 2 === 0 ? 'small' : 'large'}/signatories/lookup?size=20&searchQuery=${['mar', 'son', 'ber', 'lin', 'ann', 'ell', 'ert', 'ric', 'sch', 'ova'][k % 10]}&sortBy=${['lastname', 'firstname', 'email'][k % 3]}`;
      const at = performance.now();
      const response = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } });
      await response.text();
      if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
      afterChange.push({ at: (at - imported) / 1000, ms: performance.now() - at });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const slow = afterChange.filter((lookup) => lookup.ms > 100);
    console.log(
      `${label}: ${importedIn.toFixed(1)} s; ${afterChange.length} lookups with terms in the 3 s after it, ` +
        `${slow.length} over 100 ms${slow.length > 0 ? ` (the last at +${slow.at(-1)!.at.toFixed(2)} s)` : ''}, slowest ${Math.max(...afterChange.map((l) => l.ms)).toFixed(1)} ms, ` +
        `median ${[...afterChange].sort((a, b) => a.ms - b.ms)[Math.floor(afterChange.length / 2)]!.ms.toFixed(1)} ms\n`,
    );
  };
  await importWhileServing(`change import while serving (${CHANGED} users renamed, ${CHANGED} added)`, changeFile);
  await importWhileServing(`large change import while serving (${RENAMED} users renamed)`, renameFile);
  // A restart: the index comes from the copy kept on disk (the large change import's), with
  // anything since laid over it; lookups with terms every 50 ms meanwhile.
  const stopped = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await stopped;
  const restartedAt = performance.now();
  server = serve();
  await waitFor(`http://127.0.0.1:${port}/livez`, server);
  const listeningSeconds = (performance.now() - restartedAt) / 1000;
  await (await fetch(`http://127.0.0.1:${port}${base}/no-such-room/signatories/lookup`, { headers: { authorization: BENCH_BASIC } })).text();
  const whileLoading: number[] = [];
  for (let k = 0; ; k++) {
    const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { searchIndexes?: { organizations: number; loading: number } };
    // (No index at all below SIGNROOM_SEARCH_MIN_USERS.)
    if (ready.searchIndexes !== undefined && (ready.searchIndexes.organizations > 0 || indexSeconds === undefined) && ready.searchIndexes.loading === 0) break;
    const url = `${base}/small/signatories/lookup?size=20&searchQuery=${['kar', 'ste', 'nik', 'tho', 'ali'][k % 5]}${k}`;
    const at = performance.now();
    await (await fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: BENCH_BASIC } })).text();
    whileLoading.push(performance.now() - at);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const restartIndexSeconds = (performance.now() - restartedAt) / 1000;
  console.log(
    `restart: listening ${listeningSeconds.toFixed(1)} s after start, ${indexSeconds === undefined ? 'no index' : `index held ${restartIndexSeconds.toFixed(1)} s after start`}; ` +
      `lookups with terms meanwhile: ${whileLoading.length}${whileLoading.length > 0 ? `, slowest ${Math.max(...whileLoading).toFixed(1)} ms` : ''}\n`,
  );
  console.log('| server and load | req/s | p50 ms | p90 ms | p99 ms | errors | throughput |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const line of rows) console.log(line);
} finally {
  server.kill('SIGTERM');
  baseline?.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 300));
  rmSync(dataDir, { recursive: true, force: true });
  await database.drop();
}
