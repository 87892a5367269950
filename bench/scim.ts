/**
 * SCIM benchmark at a million users (issue: SCIM provisioning), both databases:
 *
 *   npm run bench:scim -- [--users 1000000] [--sync 100000] [--sync-rate 500] [--dialect sqlite|postgres] [--no-ceiling]
 *
 * Imports the sample organization of bench/lookup.ts (its "large" room has 100,000 members) and
 * a token, starts two servers on the one database (A takes lookups, B the syncs; a third, C, on a
 * copy for the ceiling), and reports, in one run:
 * - `filter=userName eq "…"` and `externalId eq "…"` on A, one at a time, 500 users each: latency
 *   (goal p99 ≤ 10 ms);
 * - the room of 100,000 members as a group with `excludedAttributes=members` (goal ≤ 10 ms);
 * - the first request of each of those three routes on A after the start, on a row of its own;
 * - an initial sync: `--sync` users created by `POST /Users` on B, eight connections (goal ≥ 500
 *   users/s), while the page-20 lookup mix runs on A: its p99 (goal ≤ 25 ms), and alone before;
 *   then `--sync-rate` users/s more (default 500, the goal's rate) for `--seconds`, the mix beside;
 * - the ceiling, before those two: the same syncs (for `--seconds` each) sent to a server C on a
 *   copy of the database, which A never sees, the mix on A beside them: what the sync's own work
 *   on the shared cores (C, the database, the sync's client) leaves the lookups when A has no
 *   change to take in at all (as in bench/writes.ts); skipped with --no-ceiling.
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
import { send } from './http-client.ts';
import { wrkLoad, type LoadResult } from './wrk.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '1000000' },
    sync: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '10' },
    dialect: { type: 'string', default: 'sqlite' },
    'sync-rate': { type: 'string', default: '500' },
    ceiling: { type: 'boolean', default: true },
  },
  allowNegative: true,
});
if (values.dialect !== 'sqlite' && values.dialect !== 'postgres') throw new Error('--dialect is sqlite or postgres');
const users = Number(values.users);
const sync = Number(values.sync);
const seconds = Number(values.seconds);
const syncRate = Number(values['sync-rate']);

const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-scim-'));
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

const ms = (value: number) => value.toFixed(1);

log(`generating ${users} users…`);
const file = path.join(dataDir, 'directory.json');
const organization = writeBenchDirectory(file, users);
await run(signroom, ['import', file]);
const token = (await run(signroom, ['token', 'create', 'bench', '--name', 'bench'])).split('\n')[0]!;
const BEARER = `Bearer ${token}`;

const SCIM = '/scim/v2/organizations/bench';
/** Users found by each filter: p99 is then the fifth slowest answer, not the second (one pause of the thread). */
const PROBES = 500;
const [portA, portB, portC] = [18095, 18096, 18097];
let copyDir: string | undefined;
/** B's data directory: on PostgreSQL one of its own (its blobs and index copies). */
const dirB = values.dialect === 'sqlite' ? dataDir : mkdtempSync(path.join(tmpdir(), 'signroom-bench-b-'));
let copy: BenchDatabase | undefined;
const servers: ChildProcess[] = [];

async function timed(port: number, method: string, route: string, body: unknown, expected: number): Promise<{ ms: number; json: Record<string, unknown> }> {
  const at = performance.now();
  const response = await send(
    port,
    method,
    route,
    { authorization: BEARER, ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}) },
    body !== undefined ? JSON.stringify(body) : undefined,
  );
  if (response.status !== expected) throw new Error(`${method} ${route}: ${response.status} ${response.text}`);
  return { ms: performance.now() - at, json: JSON.parse(response.text) as Record<string, unknown> };
}

const base = '/admin/api/v3/organizations/bench/rooms';
const lookupUrls = lookupMix(base);
async function lookupLoad(forSeconds: number): Promise<LoadResult> {
  return wrkLoad(`http://127.0.0.1:${portA}`, lookupUrls, { seconds: forSeconds, authorization: BENCH_BASIC });
}

try {
  if (values.ceiling) {
    // The ceiling's server C syncs into a copy (with the token), made while no server holds the database.
    ({ dir: copyDir, database: copy } = await ceilingCopy(database, dataDir));
  }
  servers.push(await startSignroom(signroom, env, portA));
  servers.push(await startSignroom(signroom, { ...env, SIGNROOM_DATA_DIR: dirB }, portB));
  if (copyDir !== undefined) servers.push(await startSignroom(signroom, { ...env, ...copy?.env, SIGNROOM_DATA_DIR: copyDir }, portC));
  for (const port of copyDir === undefined ? [portA, portB] : [portA, portB, portC]) {
    await fetch(`http://127.0.0.1:${port}${base}/small/signatories/lookup?size=1&searchQuery=sch`, { headers: { authorization: BENCH_BASIC } });
    for (;;) {
      const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { searchIndexes?: { loading: number } };
      if (ready.searchIndexes === undefined || ready.searchIndexes.loading === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  log('filters…');
  // Users spread over the organization (from the file imported), found by userName and by externalId (set on them first).
  const probes = Array.from({ length: PROBES }, (_, k) => Math.floor(((k + 0.5) * users) / PROBES));
  // One user more, not probed (in an organization of fewer users than probes, the first), for each
  // route's first request after the start: it runs the route's code for the first time, so it is
  // reported on a row of its own, not among the steady answers the goal is about (as the lookup
  // mix's first seconds are not counted either).
  const probed = new Set(probes);
  const unprobed = Math.max(
    0,
    organization.users.findIndex((_, k) => !probed.has(k)),
  );
  const emails: string[] = [];
  for (const k of [...probes, unprobed]) {
    const user = organization.users[k]!;
    emails.push(user.email);
    await timed(
      portB,
      'PATCH',
      `${SCIM}/Users/${encodeURIComponent(user.id)}`,
      { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: [{ op: 'replace', path: 'externalId', value: `ext-${k}` }] },
      200,
    );
  }
  const first = {
    userName: (await timed(portA, 'GET', `${SCIM}/Users?filter=${encodeURIComponent(`userName eq "${emails.at(-1)!.toUpperCase()}"`)}`, undefined, 200)).ms,
    externalId: (await timed(portA, 'GET', `${SCIM}/Users?filter=${encodeURIComponent(`externalId eq "ext-${unprobed}"`)}`, undefined, 200)).ms,
    group: (await timed(portA, 'GET', `${SCIM}/Groups/large?excludedAttributes=members`, undefined, 200)).ms,
  };
  const byUserName: number[] = [];
  const byExternalId: number[] = [];
  for (const [i, k] of probes.entries()) {
    const name = await timed(portA, 'GET', `${SCIM}/Users?filter=${encodeURIComponent(`userName eq "${emails[i]!.toUpperCase()}"`)}`, undefined, 200);
    if (name.json['totalResults'] !== 1) throw new Error(`userName eq "${emails[i]}" found ${String(name.json['totalResults'])}`);
    byUserName.push(name.ms);
    const ext = await timed(portA, 'GET', `${SCIM}/Users?filter=${encodeURIComponent(`externalId eq "ext-${k}"`)}`, undefined, 200);
    if (ext.json['totalResults'] !== 1) throw new Error(`externalId eq "ext-${k}" found ${String(ext.json['totalResults'])}`);
    byExternalId.push(ext.ms);
  }
  const group: number[] = [];
  for (let k = 0; k < 50; k++) group.push((await timed(portA, 'GET', `${SCIM}/Groups/large?excludedAttributes=members`, undefined, 200)).ms);

  log('lookup mix alone…');
  // Its first seconds compute every answer once (a common term's first scan holds the thread 30-65 ms): not the steady state.
  await lookupLoad(3);
  const alone = await lookupLoad(seconds);
  /**
   * Creates users `from` to `to` (exclusive) through `POST /Users` on the server at `port` (B
   * unless given) over eight connections, each as soon as the one before it on its connection has
   * answered, or no sooner than `perSecond` allows in all when given, and none once `until` has
   * resolved; their latencies and the users per second.
   */
  async function syncUsers(
    from: number,
    to: number,
    perSecond?: number,
    { port = portB, until }: { port?: number; until?: Promise<unknown> } = {},
  ): Promise<{ created: number[]; perSecond: number }> {
    const created: number[] = [];
    let next = from;
    let stopped = false;
    const stop = () => void (stopped = true);
    // A failed lookup load stops the sync too; its error is the caller's to see.
    until?.then(stop, stop);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let k = next++; k < to && !stopped; k = next++) {
          const due = perSecond === undefined ? 0 : started + ((k - from) * 1000) / perSecond - performance.now();
          if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
          const userName = `sync${process.pid}.${k}@bench.example`;
          const body = {
            schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
            userName,
            externalId: `sync-${k}`,
            name: { givenName: 'Sync', familyName: `User${k}` },
            emails: [{ primary: true, type: 'work', value: userName }],
            active: true,
          };
          created.push((await timed(port, 'POST', `${SCIM}/Users`, body, 201)).ms);
        }
      }),
    );
    return { created, perSecond: created.length / ((performance.now() - started) / 1000) };
  }

  /** The mix on A for `seconds` while users are synced to C as `perSecond` allows (as fast as answered: undefined). */
  const besideSyncToCopy = async (from: number, perSecond?: number) => {
    const lookups = lookupLoad(seconds);
    const synced = await syncUsers(from, Number.MAX_SAFE_INTEGER, perSecond, { port: portC, until: lookups });
    return { load: await lookups, synced };
  };
  let ceiling: { fast: Awaited<ReturnType<typeof besideSyncToCopy>>; paced: Awaited<ReturnType<typeof besideSyncToCopy>> } | undefined;
  if (copyDir !== undefined) {
    log('the ceiling: the lookup mix beside syncs to a copy of the database…');
    // C has taken no writes yet, where B has taken the filters' PATCHes: a few seconds first.
    await syncUsers(0, Number.MAX_SAFE_INTEGER, syncRate, { port: portC, until: new Promise((resolve) => setTimeout(resolve, 3000)) });
    const fast = await besideSyncToCopy(1_000_000);
    const paced = await besideSyncToCopy(2_000_000, syncRate);
    ceiling = { fast, paced };
    await stopSignroom(servers.pop()!);
    await copy?.drop();
    copy = undefined;
  }

  log(`initial sync of ${sync} users (8 connections) beside the lookup mix…`);
  const lookups = lookupLoad(Math.max(seconds, 5));
  const { created, perSecond: syncPerSecond } = await syncUsers(0, sync);
  const beside = await lookups;
  // An identity provider sends as fast as it is answered; at the goal's rate, the lookups beside it.
  log(`${syncRate} users/s more (8 connections) beside the lookup mix…`);
  const pacedLookups = lookupLoad(seconds);
  const paced = await syncUsers(sync, sync + syncRate * seconds, syncRate);
  const besidePaced = await pacedLookups;

  const [name, ext, grp, post] = [latencySummary(byUserName), latencySummary(byExternalId), latencySummary(group), latencySummary(created)];
  console.log(
    [
      `# SCIM, ${values.dialect}, ${users.toLocaleString('en')} users, ${new Date().toISOString().slice(0, 16)}Z`,
      '',
      '| measure | value | goal |',
      '|---|---|---|',
      `| filter userName eq: p50 / p99 (n) | ${ms(name.p50)} / ${ms(name.p99)} ms (${name.n}) | p99 ≤ 10 ms |`,
      `| filter externalId eq: p50 / p99 (n) | ${ms(ext.p50)} / ${ms(ext.p99)} ms (${ext.n}) | p99 ≤ 10 ms |`,
      `| group of ${Math.min(100_000, Math.floor(users / 10)).toLocaleString('en')} members, excludedAttributes=members: p50 / max | ${ms(grp.p50)} / ${ms(grp.max)} ms | ≤ 10 ms |`,
      `| first request of each route on A after the start (not counted above): userName eq / externalId eq / group | ${ms(first.userName)} / ${ms(first.externalId)} / ${ms(first.group)} ms | |`,
      `| initial sync, POST /Users, 8 connections: users/s (p99) | ${syncPerSecond.toFixed(0)} (${ms(post.p99)} ms) | ≥ 500 |`,
      `| lookup mix alone: req/s, p99 | ${alone.rps.toFixed(0)}, ${ms(alone.p99)} ms | |`,
      `| lookup mix during the sync (its first ${Math.max(seconds, 5)} s): req/s, p99 | ${beside.rps.toFixed(0)}, ${ms(beside.p99)} ms | p99 ≤ 25 ms |`,
      `| lookup mix during a sync of ${syncRate} users/s (reached: ${paced.perSecond.toFixed(0)}): req/s, p99 | ${besidePaced.rps.toFixed(0)}, ${ms(besidePaced.p99)} ms | p99 ≤ 25 ms |`,
      ...(ceiling === undefined
        ? []
        : [
            `| ceiling: lookup mix beside a sync to a copy, as fast as answered (${ceiling.fast.synced.perSecond.toFixed(0)} users/s): req/s, p99 | ${ceiling.fast.load.rps.toFixed(0)}, ${ms(ceiling.fast.load.p99)} ms | |`,
            `| ceiling: lookup mix beside a sync to a copy of ${syncRate} users/s (reached: ${ceiling.paced.synced.perSecond.toFixed(0)}): req/s, p99 | ${ceiling.paced.load.rps.toFixed(0)}, ${ms(ceiling.paced.load.p99)} ms | |`,
          ]),
    ].join('\n'),
  );
} finally {
  // Each server gone before its database and files are removed.
  await Promise.all(servers.map(stopSignroom));
  await cleanUp([database, copy], [dataDir, dirB, copyDir], log);
}
