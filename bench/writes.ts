/**
 * Directory write benchmark: single writes through the REST API at a million users, and the lookup
 * mix with and without writes running beside it, measured in the same run.
 *
 *   npm run bench:writes -- [--users 1000000] [--seconds 10] [--dialect sqlite|postgres] [--rate 200] [--no-ceiling]
 *
 * Imports the sample organization of bench/lookup.ts, starts two servers on the one database (A
 * takes lookups, B takes writes; a third, C, on a copy for the ceiling), and reports:
 * - single writes alone (create, rename, add a member, suspend), one client: latency; then eight
 *   clients: writes per second;
 * - the page-20 lookup mix on A (wrk, 32 connections), alone and while `--rate` writes
 *   per second go to B: the ratio of the two throughputs, and p99;
 * - the same mix while the same writes go to a server C on a copy of the database, which A never
 *   sees (the ceiling: what the writes' own work on the shared cores leaves A, with no version
 *   for A to take in; C takes a few seconds of writes first, as B has before its phase);
 *   skipped with --no-ceiling;
 * - where the cores went in each of these phases (bench/process-cpu.ts);
 * - a lookup on A started as soon as a write to B has answered, finding what it wrote (read your
 *   writes across processes): its latency.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchDatabase, ceilingCopy, cleanUp, type BenchDatabase } from './bench-database.ts';
import { startSignroom, stopSignroom } from './bench-server.ts';
import { BENCH_BASIC, latencySummary, lookupMix, writeBenchDirectory } from './bench-directory.ts';
import { API, timed, writeLoad, writeOnce } from './write-mix.ts';
import { cpuPhase, cpuTable, type CpuShares } from './process-cpu.ts';
import { wrkLoad, type LoadResult } from './wrk.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '1000000' },
    seconds: { type: 'string', default: '10' },
    dialect: { type: 'string', default: 'sqlite' },
    rate: { type: 'string', default: '200' },
    ceiling: { type: 'boolean', default: true },
  },
  allowNegative: true,
});
if (values.dialect !== 'sqlite' && values.dialect !== 'postgres') throw new Error('--dialect is sqlite or postgres');
const users = Number(values.users);
const seconds = Number(values.seconds);
const rate = Number(values.rate);

const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-writes-'));
const database = await benchDatabase(values.dialect);
const env = { ...process.env, ...database.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };
const log = (message: string) => process.stderr.write(`${message}\n`);

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => process.stderr.write(chunk));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}`))));
  });
}

log(`generating ${users} users…`);
const file = path.join(dataDir, 'directory.json');
writeBenchDirectory(file, users);
let started = performance.now();
await run(signroom, ['import', file]);
const importSeconds = (performance.now() - started) / 1000;
log(`imported in ${importSeconds.toFixed(1)} s`);
let copyDir: string | undefined;
/** B's data directory: on PostgreSQL one of its own (its blobs and index copies). */
const dirB = values.dialect === 'sqlite' ? dataDir : mkdtempSync(path.join(tmpdir(), 'signroom-bench-b-'));
let copy: BenchDatabase | undefined;

const [portA, portB, portC] = [18090, 18091, 18092];
const servers: ChildProcess[] = [];

/** The page-20 lookup mix of bench/lookup.ts on A, driven by wrk (bench/wrk.ts), and where the cores went meanwhile. */
const base = `${API}/rooms`;
const lookupUrls = lookupMix(base);
async function lookupLoad(writer: ChildProcess | undefined, forSeconds = seconds): Promise<LoadResult & { cpu: CpuShares }> {
  // B in the table: the server taking the writes of the phase.
  const phase = cpuPhase({ A: servers[0]?.pid ?? 0, B: writer?.pid ?? 0 });
  const load = await wrkLoad(`http://127.0.0.1:${portA}`, lookupUrls, { seconds: forSeconds, authorization: BENCH_BASIC });
  return { ...load, cpu: phase.stop() };
}

/** Writes at `perSecond` to the server on `port` until `stop` resolves, paced; their latencies. */
async function pacedWrites(port: number, prefix: string, perSecond: number, stop: Promise<unknown>): Promise<number[]> {
  const latencies: number[] = [];
  let done = false;
  void stop.then(() => (done = true));
  const began = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let k = 0; !done; k++) {
    const due = began + (k * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    if (done) break;
    inFlight.push(writeOnce(port, prefix, k).then((ms) => void latencies.push(ms)));
    // Keep the order of each user's four writes: wait for the create before the rest.
    if (k % 4 === 0) await inFlight.at(-1);
  }
  await Promise.all(inFlight);
  return latencies;
}

try {
  if (values.ceiling) {
    // The ceiling's server C writes to a copy, made while no server holds the database.
    ({ dir: copyDir, database: copy } = await ceilingCopy(database, dataDir));
  }
  servers.push(await startSignroom(signroom, { ...env, SIGNROOM_DATA_DIR: dataDir }, portA));
  servers.push(await startSignroom(signroom, { ...env, SIGNROOM_DATA_DIR: dirB }, portB));
  if (copyDir !== undefined) servers.push(await startSignroom(signroom, { ...env, ...copy?.env, SIGNROOM_DATA_DIR: copyDir }, portC));
  // The password hash and each server's index, before anything is measured.
  for (const port of copyDir === undefined ? [portA, portB] : [portA, portB, portC]) {
    await timed(port, 'GET', `${base}/small/signatories/lookup?size=1&searchQuery=sch`, undefined, 200);
    for (;;) {
      const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { searchIndexes?: { organizations: number; loading: number } };
      if (ready.searchIndexes === undefined || ready.searchIndexes.loading === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  log('single writes, one client…');
  const single = await writeLoad(portB, 's', 1, seconds);
  log('single writes, eight clients…');
  const eight = await writeLoad(portB, 'e', 8, seconds);

  // A has yet to take in the thousands of versions the write phases made: it does so at its next
  // lookups (a stall of hundreds of milliseconds that the alone phase's p99 and throughput would
  // count), so the mix runs a moment unmeasured first.
  log('lookup mix warming up…');
  await lookupLoad(undefined, 3);
  log('lookup mix alone…');
  const alone = await lookupLoad(servers[1]);
  /** The lookup mix on A while `rate` writes per second go to the server on `port`. */
  const besideWritesTo = async (port: number, prefix: string, writer: ChildProcess | undefined) => {
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const writing = pacedWrites(port, prefix, rate, stopped);
    const load = await lookupLoad(writer);
    stop();
    return { load, writes: latencySummary(await writing) };
  };
  let ceiling: Awaited<ReturnType<typeof besideWritesTo>> | undefined;
  if (copyDir !== undefined) {
    log(`lookup mix with ${rate} writes/s to a copy of the database (the ceiling)…`);
    // C has taken no writes yet, where B has taken the single writes' phases: a few seconds first.
    await pacedWrites(portC, 'w', rate, new Promise((resolve) => setTimeout(resolve, 3000)));
    ceiling = await besideWritesTo(portC, 'c', servers[2]);
    await stopSignroom(servers.pop()!);
  }
  log(`lookup mix with ${rate} writes/s on the other server…`);
  const { load: beside, writes: besideWrites } = await besideWritesTo(portB, 'p', servers[1]);

  log('a lookup on A right after each write to B…');
  const afterWrite: number[] = [];
  for (let k = 0; k < 200; k++) {
    const id = `ryw${process.pid}-${k}`;
    await timed(portB, 'POST', `${API}/users`, { id, firstname: 'Rhea', lastname: `Quickread${k}`, email: `ryw${k}.${process.pid}@bench.example` }, 201);
    const at = performance.now();
    const response = await fetch(`http://127.0.0.1:${portA}${base}/small/signatories/lookup?size=20&searchQuery=quickread${k}`, {
      headers: { authorization: BENCH_BASIC },
    });
    const page = (await response.json()) as { totalElements: number };
    afterWrite.push(performance.now() - at);
    if (page.totalElements < 1) throw new Error(`read your writes: quickread${k} not found on the other server`);
  }

  const singleSummary = latencySummary(single.latencies);
  const eightSummary = latencySummary(eight.latencies);
  const after = latencySummary(afterWrite);
  const ms = (value: number) => value.toFixed(1);
  const lines = [
    `# directory writes, ${values.dialect}, ${users.toLocaleString('en')} users, ${new Date().toISOString().slice(0, 16)}Z`,
    '',
    `import: ${importSeconds.toFixed(1)} s`,
    '',
    '| measure | value | goal |',
    '|---|---|---|',
    `| single writes, 1 client: p50 / p99 | ${ms(singleSummary.p50)} / ${ms(singleSummary.p99)} ms | p99 ≤ 20 ms |`,
    `| single writes, 1 client: writes/s | ${single.perSecond.toFixed(0)} | |`,
    `| single writes, 8 clients: writes/s (p99) | ${eight.perSecond.toFixed(0)} (${ms(eightSummary.p99)} ms) | ≥ ${values.dialect === 'postgres' ? '1,000' : '500'} |`,
    `| lookup mix alone: req/s, p99 | ${alone.rps.toFixed(0)}, ${ms(alone.p99)} ms | |`,
    `| lookup mix beside ${rate} writes/s: req/s, p99 | ${beside.rps.toFixed(0)}, ${ms(beside.p99)} ms | p99 ≤ 25 ms |`,
    `| ratio of the two throughputs | ${((100 * beside.rps) / alone.rps).toFixed(0)}% | ≥ 80% |`,
    ...(ceiling === undefined
      ? []
      : [
          `| ceiling: lookup mix beside ${rate} writes/s to a copy of the database: req/s, p99 (ratio) | ${ceiling.load.rps.toFixed(0)}, ${ms(ceiling.load.p99)} ms (${((100 * ceiling.load.rps) / alone.rps).toFixed(0)}%) | |`,
          `| ceiling: its writes to C: p50 / p99 (n) | ${ms(ceiling.writes.p50)} / ${ms(ceiling.writes.p99)} ms (${ceiling.writes.n}) | |`,
        ]),
    `| writes beside the lookups: p50 / p99 (n) | ${ms(besideWrites.p50)} / ${ms(besideWrites.p99)} ms (${besideWrites.n}) | |`,
    `| lookup on A right after a write to B: p50 / p99 | ${ms(after.p50)} / ${ms(after.p99)} ms | p99 ≤ 50 ms |`,
  ];
  lines.push(
    '',
    'Where the cores went during the lookup phases (CPU seconds per second; A: the lookup server, B: the server taking the writes):',
    '',
    ...cpuTable([
      { label: 'lookup mix alone', shares: alone.cpu, answers: alone.rps },
      ...(ceiling === undefined
        ? []
        : [{ label: `ceiling: writes to C, on a copy`, shares: ceiling.load.cpu, answers: ceiling.load.rps, writes: ceiling.writes.n / seconds }]),
      { label: `lookup mix beside ${rate} writes/s`, shares: beside.cpu, answers: beside.rps, writes: besideWrites.n / seconds },
    ]),
  );
  console.log(lines.join('\n'));
  const ceilingErrors = ceiling?.load.errors ?? 0;
  if (alone.errors + beside.errors + ceilingErrors > 0)
    console.log(`\n(lookup errors: ${alone.errors} alone, ${ceilingErrors} in the ceiling phase, ${beside.errors} beside the writes)`);
} finally {
  // Each server gone before its database and files are removed.
  await Promise.all(servers.map(stopSignroom));
  await cleanUp([database, copy], [dataDir, dirB, copyDir], log);
}
