/**
 * Thumbnail fidelity over the whole PDF corpus (issue 18): every file of ../shared/pdf-corpus is
 * uploaded to the real app, and its thumbnail compared with poppler's pdftoppm rendering of
 * page 1 at the same width (top part kept, as the thumbnail keeps it): mean absolute difference
 * of grey levels, 0–1. Prints the share within 0.08, the blanks (ours empty where poppler draws),
 * the worst files, and the time to each answer.
 *
 *   npm run bench:fidelity [-- --only NAME_SUBSTRING] [--save DIR (ours and poppler's side by side, per file)]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { migrateToLatest, openDatabase } from '../src/db/database.ts';
import { importDirectory } from '../src/directory/bulk-import.ts';
import { validateDirectoryFile } from '../src/domain/directory-file.ts';
import { importOptionsFor } from '../src/search-index/index.ts';
import { compareWithPoppler, FAITHFUL_DIFFERENCE, popplerPage1 } from '../test/helpers/poppler.ts';

const { values } = parseArgs({ options: { only: { type: 'string' }, save: { type: 'string' } } });
const GOAL_SHARE = 0.97;
const root = path.join(import.meta.dirname, '..');
const corpus = path.join(root, '..', 'shared', 'pdf-corpus');
const work = mkdtempSync(path.join(tmpdir(), 'signroom-fidelity-'));
const config = loadConfig({ SIGNROOM_DATA_DIR: path.join(work, 'data'), SIGNROOM_LOG_LEVEL: 'silent' });
const authorization = `Basic ${Buffer.from('bench:bench-password').toString('base64')}`;

const setup = openDatabase(config);
await migrateToLatest(setup);
const directory = validateDirectoryFile({
  organizations: [{ id: 'bench', name: 'bench', users: [], rooms: [{ id: 'room', name: 'room', members: [] }] }],
  credentials: [{ username: 'bench', password: 'bench-password', organizations: ['bench'] }],
});
await importDirectory(setup.db, directory.file, [], importOptionsFor(config));
await setup.close();
const app = await buildApp(config);
await app.ready();

interface Row {
  file: string;
  status: number;
  ms: number;
  difference?: number;
  blank?: boolean;
  popplerRenders: boolean;
}
const rows: Row[] = [];
try {
  const files = readdirSync(corpus)
    .filter((name) => name.toLowerCase().endsWith('.pdf') && (values.only === undefined || name.includes(values.only)))
    .sort();
  for (const file of files) {
    const bytes = readFileSync(path.join(corpus, file));
    const started = performance.now();
    const response = await app.inject({
      method: 'POST',
      url: '/admin/api/v3/organizations/bench/rooms/room/documents',
      headers: { authorization, 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: bytes.toString('base64') }),
    });
    const ms = performance.now() - started;
    const popplerFull = await popplerPage1(path.join(corpus, file), 200);
    const row: Row = { file, status: response.statusCode, ms, popplerRenders: popplerFull !== undefined };
    if (response.statusCode === 201 && popplerFull !== undefined) {
      const ours = Buffer.from(response.json<{ thumbnail: string }>().thumbnail.replace(/^data:image\/png;base64,/, ''), 'base64');
      const comparison = await compareWithPoppler(ours, popplerFull);
      row.difference = comparison.difference;
      row.blank = comparison.blank;
      if (values.save !== undefined) {
        const { width, height } = comparison;
        await sharp({ create: { width: 2 * width + 10, height, channels: 3, background: '#ff0000' } })
          .composite([
            { input: await sharp(comparison.poppler).resize(width, height, { fit: 'fill' }).png().toBuffer(), left: 0, top: 0 },
            { input: ours, left: width + 10, top: 0 },
          ])
          .png()
          .toFile(path.join(values.save, `${file}.png`));
      }
    }
    rows.push(row);
    process.stderr.write(
      `${file}: ${row.status} ${row.ms.toFixed(0)} ms${row.difference !== undefined ? ` diff ${row.difference.toFixed(3)}${row.blank ? ' BLANK' : ''}` : ''}\n`,
    );
  }
} finally {
  await app.close();
  rmSync(work, { recursive: true, force: true });
}

const compared = rows.filter((row) => row.difference !== undefined);
const faithful = compared.filter((row) => row.difference! <= FAITHFUL_DIFFERENCE && !row.blank);
const blanks = compared.filter((row) => row.blank);
const refusedPopplerRenders = rows.filter((row) => row.status !== 201 && row.popplerRenders);
const times = rows.map((row) => row.ms).sort((a, b) => a - b);
const at = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))] ?? 0;
console.log(`\nThumbnail fidelity, ${rows.length} PDFs of the corpus, ${new Date().toISOString().slice(0, 16)}Z\n`);
console.log('| measure | value | goal |\n|---|---:|---|');
console.log(`| poppler renders page 1, and we store the document | ${compared.length} | |`);
console.log(
  `| of those, within ${FAITHFUL_DIFFERENCE} of poppler | ${faithful.length} (${((100 * faithful.length) / Math.max(1, compared.length)).toFixed(1)}%) | ≥ ${GOAL_SHARE * 100}% |`,
);
console.log(`| blank where poppler draws | ${blanks.length} | 0 |`);
console.log(`| refused although poppler renders page 1 | ${refusedPopplerRenders.length} | |`);
console.log(`| time to the answer: p50 / p95 / max | ${at(0.5).toFixed(0)} / ${at(0.95).toFixed(0)} / ${times.at(-1)?.toFixed(0)} ms | max ≤ 5000 ms |`);
console.log('\nFurthest from poppler:\n');
for (const row of compared.sort((a, b) => b.difference! - a.difference!).slice(0, 25)) {
  console.log(`- ${row.file}: ${row.difference!.toFixed(3)}${row.blank ? ' (blank)' : ''}, ${row.ms.toFixed(0)} ms`);
}
if (refusedPopplerRenders.length > 0)
  console.log(`\nRefused, poppler renders: ${refusedPopplerRenders.map((row) => `${row.file} (${row.status})`).join(', ')}`);
