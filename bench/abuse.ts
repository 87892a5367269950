/**
 * Abuse benchmark (issue 24), against `bin/signroom serve` on SQLite with its default settings:
 *   npm run bench:abuse -- [--bombs 9] [--flood 200]
 *
 * 1. An honest one-page upload alone, then while nine image bombs from another credential are in
 *    flight: time to 201 of each, and the deployment's peak memory (server and render processes).
 * 2. A first login (its password not yet verified) alone, then while 200 logins with made-up
 *    usernames arrive at once from 200 addresses (127.0.1.x).
 * 3. Ten uploads that declare 20 MB and stop sending: time to their 408, the server's memory
 *    before, while they are held, and after.
 */
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startSignroom } from './bench-server.ts';
import { imageBomb, makePdf } from '../test/helpers/pdf.ts';

const { values } = parseArgs({ options: { bombs: { type: 'string', default: '9' }, flood: { type: 'string', default: '200' } } });
const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-abuse-bench-'));
const env = { ...process.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'error' };
const port = 18093;
const base = `http://127.0.0.1:${port}`;
const documentsPath = '/admin/api/v3/organizations/bench/rooms/room/documents';
const lookupPath = '/admin/api/v3/organizations/bench/rooms/room/signatories/lookup?size=5';
const basic = (username: string, password: string) => `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
const CREDENTIALS = ['attacker', 'honest', 'first-a', 'first-b'].map((username) => ({ username, password: `${username}-password`, organizations: ['bench'] }));

writeFileSync(
  path.join(dataDir, 'directory.json'),
  JSON.stringify({
    organizations: [
      {
        id: 'bench',
        name: 'Bench',
        users: [{ id: 'u1', firstname: 'Anna', lastname: 'Bench', email: 'anna@bench.example' }],
        rooms: [{ id: 'room', name: 'Room', members: ['u1'] }],
      },
    ],
    credentials: CREDENTIALS,
  }),
);
execFileSync(signroom, ['import', path.join(dataDir, 'directory.json')], { env });
const server: ChildProcess = await startSignroom(signroom, env, port);

/** Resident memory of a process and all its descendants, in bytes (from /proc). */
function deploymentRss(pid: number): number {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const visit = (id: number) => {
    try {
      total += Number(readFileSync(`/proc/${id}/statm`, 'utf8').split(' ')[1]) * 4096;
    } catch {
      return;
    }
    for (const child of children.get(id) ?? []) visit(child);
  };
  visit(pid);
  return total;
}

/** Samples the deployment's memory until stopped; resolves the peak. */
function peakMemory(pid: number): { stop: () => number } {
  let peak = deploymentRss(pid);
  const timer = setInterval(() => (peak = Math.max(peak, deploymentRss(pid))), 50);
  return {
    stop: () => {
      clearInterval(timer);
      return peak;
    },
  };
}

async function upload(authorization: string, pdf: Buffer, name: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${base}${documentsPath}`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ payload: pdf.toString('base64'), name }),
  });
  await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started };
}

/** A GET of the lookup from a given local address (127.0.0.0/8 is all loopback on Linux). */
function lookupFrom(localAddress: string, authorization: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(`${base}${lookupPath}`, { localAddress, headers: { authorization }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
    });
    req.on('error', reject);
    req.end();
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const mb = (bytes: number) => `${Math.round(bytes / 1048576)} MB`;
const ms = (value: number) => `${Math.round(value)} ms`;
const pid = server.pid!;

try {
  // 1. Nine bombs and an honest upload.
  const honest = basic('honest', 'honest-password');
  const page = (i: number) => makePdf([{ width: 595, height: 842, content: `BT /F1 24 Tf 72 720 Td (Contract ${i}) Tj ET` }]);
  const alone: number[] = [];
  for (let i = 0; i < 5; i++) alone.push((await upload(honest, page(i), `alone-${i}.pdf`)).ms);
  const memoryAlone = deploymentRss(pid);
  const bomb = imageBomb();
  const sampling = peakMemory(pid);
  const bombs = Array.from({ length: Number(values.bombs) }, (_, i) => upload(basic('attacker', 'attacker-password'), bomb, `bomb-${i}.pdf`));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const beside: number[] = [];
  for (let i = 0; i < 3; i++) beside.push((await upload(honest, page(100 + i), `beside-${i}.pdf`)).ms);
  const bombAnswers = await Promise.all(bombs);
  const peak = sampling.stop();
  console.log(`\n1. An honest one-page upload beside ${values.bombs} image bombs from another credential`);
  console.log('| | honest upload to 201: median / max | deployment memory |');
  console.log('|---|---:|---:|');
  console.log(`| alone | ${ms(median(alone))} / ${ms(Math.max(...alone))} | ${mb(memoryAlone)} |`);
  console.log(`| beside the bombs | ${ms(median(beside))} / ${ms(Math.max(...beside))} | peak ${mb(peak)} |`);
  console.log(
    `bombs: statuses ${[...new Set(bombAnswers.map((answer) => answer.status))].join(', ')}; to their answers median ${ms(median(bombAnswers.map((answer) => answer.ms)))}, max ${ms(Math.max(...bombAnswers.map((answer) => answer.ms)))}`,
  );

  // 2. A login flood of made-up usernames from many addresses, and a first login beside it.
  const firstAlone = await lookupFrom('127.0.0.1', basic('first-a', 'first-a-password'));
  const flood = Array.from({ length: Number(values.flood) }, (_, i) => lookupFrom(`127.0.1.${(i % 250) + 1}`, basic(`made-up-${i}`, 'guess')));
  await new Promise((resolve) => setTimeout(resolve, 20));
  const firstBeside = await lookupFrom('127.0.0.1', basic('first-b', 'first-b-password'));
  const floodAnswers = await Promise.all(flood);
  console.log(`\n2. A first login (password not yet verified) beside ${values.flood} made-up usernames at once`);
  console.log('| | status | time |');
  console.log('|---|---:|---:|');
  console.log(`| alone | ${firstAlone.status} | ${ms(firstAlone.ms)} |`);
  console.log(`| beside the flood | ${firstBeside.status} | ${ms(firstBeside.ms)} |`);
  console.log(
    `flood: statuses ${[...new Set(floodAnswers.map((answer) => answer.status))].join(', ')}; median ${ms(median(floodAnswers.map((answer) => answer.ms)))}`,
  );

  // 3. Ten stalled bodies.
  const before = deploymentRss(pid);
  const started = performance.now();
  const stalled = Array.from(
    { length: 10 },
    () =>
      new Promise<{ status: string; ms: number }>((resolve) => {
        const socket = connect({ port, host: '127.0.0.1' }, () => {
          socket.write(
            `POST ${documentsPath} HTTP/1.1\r\nHost: x\r\nAuthorization: ${honest}\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n{"payload":"`,
          );
        });
        let data = '';
        socket.on('data', (chunk) => (data += String(chunk)));
        const done = () => resolve({ status: /^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 'closed', ms: performance.now() - started });
        socket.on('close', done);
        socket.on('error', done);
      }),
  );
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const holding = deploymentRss(pid);
  const answers = await Promise.all(stalled);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const after = deploymentRss(pid);
  console.log('\n3. Ten uploads that declare 20 MB and stop sending');
  console.log('| answers | time to answer: max | deployment memory: before / while held / after |');
  console.log('|---|---:|---:|');
  console.log(
    `| ${[...new Set(answers.map((answer) => answer.status))].join(', ')} | ${ms(Math.max(...answers.map((answer) => answer.ms)))} | ${mb(before)} / ${mb(holding)} / ${mb(after)} |`,
  );
} finally {
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  rmSync(dataDir, { recursive: true, force: true });
}
