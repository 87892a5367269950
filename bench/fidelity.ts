/**
 * Thumbnail fidelity over the whole PDF corpus (issue 18): every file of ../shared/pdf-corpus is
 * uploaded to the real app, and its thumbnail compared with poppler's pdftoppm rendering of
 * page 1 at the same width (top part kept, as the thumbnail keeps it): mean absolute difference
 * of grey levels, 0–1. Counted as test/documents/corpus-fidelity.once.test.ts counts (bench/uploads.ts).
 * Prints the share within 0.08, the blanks (ours empty where poppler draws), the worst files, and
 * the time to each answer, in process (`npm run bench:upload-families` times them over HTTP).
 *
 *   npm run bench:fidelity [-- --only NAME_SUBSTRING] [--save DIR (ours and poppler's side by side, per file)]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { FAITHFUL_DIFFERENCE } from '../test/helpers/poppler.ts';
import { BENCH_AUTHORIZATION, BENCH_DOCUMENTS, startBenchApp } from './bench-app.ts';
import { CORPUS, corpusPdfs, judgeCorpusAnswer, percentile, summarizeFidelity, type Judgement } from './uploads.ts';

const { values } = parseArgs({ options: { only: { type: 'string' }, save: { type: 'string' } } });
const GOAL_SHARE = 0.97;
const { app, close } = await startBenchApp();

const rows: { file: string; status: number; ms: number; judgement: Judgement }[] = [];
try {
  for (const file of corpusPdfs(values.only)) {
    const bytes = readFileSync(path.join(CORPUS, file));
    const started = performance.now();
    const response = await app.inject({
      method: 'POST',
      url: BENCH_DOCUMENTS,
      headers: { authorization: BENCH_AUTHORIZATION, 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: bytes.toString('base64') }),
    });
    const ms = performance.now() - started;
    const judgement = await judgeCorpusAnswer(path.join(CORPUS, file), response.statusCode, response.body);
    if (judgement.kind === 'compared' && values.save !== undefined) {
      const { width, height, poppler, ours } = judgement.comparison;
      await sharp({ create: { width: 2 * width + 10, height, channels: 3, background: '#ff0000' } })
        .composite([
          { input: await sharp(poppler).resize(width, height, { fit: 'fill' }).png().toBuffer(), left: 0, top: 0 },
          { input: ours, left: width + 10, top: 0 },
        ])
        .png()
        .toFile(path.join(values.save, `${file}.png`));
    }
    rows.push({ file, status: response.statusCode, ms, judgement });
    const detail =
      judgement.kind === 'compared' ? ` diff ${judgement.comparison.difference.toFixed(3)}${judgement.comparison.blank ? ' BLANK' : ''}` : ` ${judgement.kind}`;
    process.stderr.write(`${file}: ${response.statusCode} ${ms.toFixed(0)} ms${detail}\n`);
  }
} finally {
  await close();
}

const summary = summarizeFidelity(rows);
const times = rows.map((row) => row.ms);
console.log(`\nThumbnail fidelity, ${rows.length} PDFs of the corpus, ${new Date().toISOString().slice(0, 16)}Z\n`);
console.log('| measure | value | goal |\n|---|---:|---|');
console.log(`| poppler draws page 1 (encrypted files poppler cannot decrypt aside: ${summary.encrypted.length}) | ${summary.popplerDraws} | |`);
console.log(
  `| of those, within ${FAITHFUL_DIFFERENCE} of poppler | ${summary.faithful} (${((100 * summary.faithful) / Math.max(1, summary.popplerDraws)).toFixed(1)}%) | ≥ ${GOAL_SHARE * 100}% |`,
);
console.log(`| blank where poppler draws | ${summary.blanks.length} | 0 |`);
console.log(`| refused although poppler draws page 1 (not faithful) | ${summary.refused.length} | |`);
console.log(
  `| time to the answer, in process: p50 / p95 / max | ${percentile(times, 50).toFixed(0)} / ${percentile(times, 95).toFixed(0)} / ${percentile(times, 100).toFixed(0)} ms | max ≤ 5000 ms |`,
);
console.log('\nFurthest from poppler:\n');
const compared = rows.flatMap((row) => (row.judgement.kind === 'compared' ? [{ ...row, ...row.judgement.comparison }] : []));
for (const row of compared.sort((a, b) => b.difference - a.difference).slice(0, 25)) {
  console.log(`- ${row.file}: ${row.difference.toFixed(3)}${row.blank ? ' (blank)' : ''}, ${row.ms.toFixed(0)} ms`);
}
if (summary.refused.length > 0) console.log(`\nRefused, poppler draws page 1: ${summary.refused.join(', ')}`);
if (summary.encrypted.length > 0) console.log(`\nNot counted, encrypted: ${summary.encrypted.join(', ')}`);
