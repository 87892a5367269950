/**
 * Crash benchmark: kill -9 the server during a stream of concurrent uploads,
 * start it again, and check every upload that got a 201:
 *   npm run bench:crash -- [--rounds 10] [--uploaders 6] [--dialect sqlite|postgres]
 *
 * Each round starts `bin/signroom serve`, runs concurrent uploaders sending
 * distinct PDFs (up to 1 MB), kills the server with SIGKILL at a moment drawn
 * from a seeded generator (so a run can be repeated), restarts it, and reports:
 * the uploads acknowledged, how many of them read back byte for byte, the
 * documents stored (a document committed just before the kill may not have had
 * its 201 sent), blobs no document refers to, and temporary files left.
 *
 * PostgreSQL: a fresh database on the server SIGNROOM_BENCH_POSTGRES_URL names
 * (default postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { benchDatabase } from './bench-database.ts';
import { startSignroom } from './bench-server.ts';
import { makePdf } from '../test/helpers/pdf.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '10' }, uploaders: { type: 'string', default: '6' }, dialect: { type: 'string', default: 'sqlite' } },
});
if (values.dialect !== 'sqlite' && values.dialect !== 'postgres') throw new Error('--dialect is sqlite or postgres');
const rounds = Number(values.rounds);
const uploaders = Number(values.uploaders);
const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-crash-bench-'));
const database = await benchDatabase(values.dialect);
const env = { ...process.env, ...database.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };
const base = 'http://127.0.0.1:18095';
const documentsUrl = `${base}/admin/api/v3/organizations/bench/rooms/room/documents`;
const headers = { authorization: `Basic ${Buffer.from('bench:bench-password').toString('base64')}`, 'content-type': 'application/json' };

/** A small seeded generator (mulberry32), so the kill moments repeat from run to run. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
/** Kill moments and document sizes from separate generators: the moments repeat whatever the uploads did. */
const killMoments = seeded(42);
const sizes = seeded(7);

const serve = () => startSignroom(signroom, env, 18095);

/** Every document of the room: id and SHA-256 from the list (metadata). */
async function storedDocuments(): Promise<{ id: string; sha256: string }[]> {
  const documents: { id: string; sha256: string }[] = [];
  for (let page = 0; ; page++) {
    const response = await fetch(`${documentsUrl}?size=500&page=${page}`, { headers });
    const body = (await response.json()) as { content: { id: string; sha256: string }[]; last: boolean };
    documents.push(...body.content);
    if (body.last) return documents;
  }
}

/** The SHA-256 of every stored blob: files on SQLite, the blobs table on PostgreSQL. */
async function storedBlobs(): Promise<string[]> {
  if (database.env['DATABASE_URL'] !== undefined) {
    const client = new pg.Client({ connectionString: database.env['DATABASE_URL'] });
    await client.connect();
    try {
      return (await client.query<{ sha256: string }>('SELECT sha256 FROM blobs')).rows.map((row) => row.sha256);
    } finally {
      await client.end();
    }
  }
  const blobs = path.join(dataDir, 'blobs');
  return readdirSync(blobs)
    .filter((shard) => /^[0-9a-f]{2}$/.test(shard))
    .flatMap((shard) => readdirSync(path.join(blobs, shard)));
}

const temporaryFiles = () => (existsSync(path.join(dataDir, 'blobs', 'tmp')) ? readdirSync(path.join(dataDir, 'blobs', 'tmp')).length : 0);

try {
  writeFileSync(
    path.join(dataDir, 'directory.json'),
    JSON.stringify({
      organizations: [{ id: 'bench', name: 'Bench', users: [], rooms: [{ id: 'room', name: 'Room', members: [] }] }],
      credentials: [{ username: 'bench', password: 'bench-password', organizations: ['bench'] }],
    }),
  );
  await promisify(execFile)(signroom, ['import', path.join(dataDir, 'directory.json')], { env });

  const acknowledged = new Map<string, Buffer>();
  const rows: string[] = [];
  let counter = 0;
  let server = await serve();
  for (let round = 1; round <= rounds; round++) {
    const before = acknowledged.size;
    let stopped = false;
    let inFlight = 0;
    const uploader = async () => {
      while (!stopped) {
        const n = counter++;
        const pdf = makePdf([{ width: 200 + (n % 400), height: 300, content: `% round ${round}, upload ${n} ${'x'.repeat(Math.floor(sizes() * 1_000_000))}` }]);
        inFlight++;
        try {
          const response = await fetch(documentsUrl, { method: 'POST', headers, body: JSON.stringify({ payload: pdf.toString('base64') }) });
          if (response.status !== 201) throw new Error(`upload answered ${response.status}: ${await response.text()}`);
          acknowledged.set(((await response.json()) as { id: string }).id, pdf);
        } catch (error) {
          if (stopped || server.exitCode !== null || (error as Error).message.includes('fetch failed')) return;
          throw error;
        } finally {
          inFlight--;
        }
      }
    };
    const running = Array.from({ length: uploaders }, uploader);
    const killAfterMs = Math.round(1000 + killMoments() * 2000);
    await new Promise((resolve) => setTimeout(resolve, killAfterMs));
    const inFlightAtKill = inFlight;
    server.kill('SIGKILL');
    await once(server, 'exit');
    stopped = true;
    await Promise.all(running);

    server = await serve();
    let identical = 0;
    for (const [id, bytes] of acknowledged) {
      const response = await fetch(`${documentsUrl}/${id}/content`, { headers });
      if (response.status === 200 && Buffer.from(await response.arrayBuffer()).equals(bytes)) identical++;
    }
    const documents = await storedDocuments();
    const referenced = new Set(documents.map((document) => document.sha256));
    const orphans = (await storedBlobs()).filter((sha256) => !referenced.has(sha256)).length;
    rows.push(
      `| ${round} | ${killAfterMs} | ${inFlightAtKill} | ${acknowledged.size - before} | ${identical} of ${acknowledged.size} | ${documents.length} | ${documents.length - acknowledged.size} | ${orphans} | ${temporaryFiles()} |`,
    );
  }
  server.kill('SIGTERM');
  await once(server, 'exit');

  console.log(`\nCrash benchmark, Node ${process.version}, database ${values.dialect}, ${uploaders} concurrent uploaders, ${rounds} rounds\n`);
  console.log(
    '| round | kill -9 after ms | uploads in flight at the kill | 201s this round | acknowledged, read back identical (all rounds) | documents stored | stored without a 201 | orphan blobs | temporary files |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) console.log(row);
} finally {
  rmSync(dataDir, { recursive: true, force: true });
  await database.drop();
}
