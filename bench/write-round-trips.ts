/**
 * Directory writes against a PostgreSQL that is not on the server's machine: how many round
 * trips of the link a write waits for.
 *
 *   npm run bench:round-trips -- [--users 20000] [--seconds 10] [--delay 1]
 *
 * On one machine a round trip to PostgreSQL costs little next to the statements' own work, so
 * bench:writes cannot show what the writer's round trips cost where the database is across a
 * network. Here the server reaches PostgreSQL through a proxy in this process that holds every
 * chunk `--delay` ms each way (Node's timers: about 1 ms at least), imports the sample
 * organization of bench/lookup.ts (directly, not through the proxy), and reports the link's round
 * trip (`select 1` through the proxy, p50) and, for the write mix of bench:writes (create, rename,
 * add a member, suspend) from one client, each kind's p50 in milliseconds and in round trips of
 * the link: the baseline is the link, measured in the same run. Then the mix from eight clients:
 * writes per second, which the organization's one writer bounds by the round trips of a batch.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { benchDatabase } from './bench-database.ts';
import { latencySummary, writeBenchDirectory } from './bench-directory.ts';
import { startSignroom, stopSignroom } from './bench-server.ts';
import { API, timed, writeLoad, writeOnce } from './write-mix.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '20000' },
    seconds: { type: 'string', default: '10' },
    delay: { type: 'string', default: '1' },
  },
});
const users = Number(values.users);
const seconds = Number(values.seconds);
const delay = Number(values.delay);
const log = (message: string) => process.stderr.write(`${message}\n`);

const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-round-trips-'));
const database = await benchDatabase('postgres');
const direct = new URL(database.env['DATABASE_URL']!);

/** A TCP proxy to PostgreSQL that holds each chunk `delay` ms each way, in order. */
const proxy = net.createServer((client) => {
  const server = net.connect(Number(direct.port || 5432), direct.hostname);
  client.setNoDelay(true);
  server.setNoDelay(true);
  const forward = (from: net.Socket, to: net.Socket) => from.on('data', (chunk) => setTimeout(() => to.write(chunk), delay));
  forward(client, server);
  forward(server, client);
  const close = () => {
    client.destroy();
    server.destroy();
  };
  for (const socket of [client, server]) socket.on('error', close).on('close', close);
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const proxied = new URL(direct);
proxied.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code}`))));
  });
}

const env = { ...process.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };
const port = 18095;
try {
  log(`generating and importing ${users} users…`);
  const file = path.join(dataDir, 'directory.json');
  writeBenchDirectory(file, users);
  await run(signroom, ['import', file], { ...env, DATABASE_URL: direct.toString() });

  log('the link’s round trip…');
  const link = new pg.Client({ connectionString: proxied.toString() });
  await link.connect();
  const trips: number[] = [];
  for (let k = 0; k < 200; k++) {
    const at = performance.now();
    await link.query('select 1');
    trips.push(performance.now() - at);
  }
  await link.end();
  const trip = latencySummary(trips).p50;

  const server = await startSignroom(signroom, { ...env, DATABASE_URL: proxied.toString() }, port);
  try {
    // The password hash, before anything is measured.
    await timed(port, 'GET', `${API}/rooms/small/signatories/lookup?size=1&searchQuery=sch`, undefined, 200);
    log('single writes, one client…');
    const perKind: number[][] = [[], [], [], []];
    const deadline = performance.now() + seconds * 1000;
    for (let k = 0; performance.now() < deadline || k % 4 !== 0; k++) perKind[k % 4]!.push(await writeOnce(port, 's', k));
    log('single writes, eight clients…');
    const eight = await writeLoad(port, 'e', 8, seconds);

    const ms = (value: number) => value.toFixed(1);
    const kinds = ['create a user', 'rename (merge patch)', 'add to a room', 'suspend (merge patch)'];
    const lines = [
      `# directory writes through a link of ${delay} ms each way, postgres, ${users.toLocaleString('en')} users, ${new Date().toISOString().slice(0, 16)}Z`,
      '',
      `The link's round trip (\`select 1\`, p50): ${ms(trip)} ms`,
      '',
      '| write, one client | p50 | in round trips of the link |',
      '|---|---:|---:|',
      ...kinds.map((kind, k) => {
        const p50 = latencySummary(perKind[k]!).p50;
        return `| ${kind} | ${ms(p50)} ms | ${(p50 / trip).toFixed(1)} |`;
      }),
      '',
      `Eight clients: ${eight.perSecond.toFixed(0)} writes/s (p50 ${ms(latencySummary(eight.latencies).p50)} ms, ${(latencySummary(eight.latencies).p50 / trip).toFixed(1)} round trips)`,
    ];
    console.log(lines.join('\n'));
  } finally {
    await stopSignroom(server);
  }
} finally {
  proxy.close();
  await database.drop().catch((error: unknown) => log(`could not drop the bench database: ${String(error)}`));
  rmSync(dataDir, { recursive: true, force: true });
}
