/**
 * Uploads by family (issue 18), over HTTP to the app listening on a port (buildApp, SQLite,
 * default configuration and so the default render budget), in one run on this machine:
 *
 *   npm run bench:upload-families -- [--runs 5] [--port 18091] [--cold]
 *
 * 1. The whole corpus, each PDF once, on the newly started server: p50 / p95 / max ms to the
 *    answer, how many over 5 s, and the thumbnails within 0.08 of poppler's page 1 and blank,
 *    counted as test/documents/corpus-fidelity.once.test.ts counts (bench/uploads.ts); pdftoppm
 *    once on each.
 * 2. Per family of the thumbnail tests (test/documents/thumbnail-fidelity.test.ts, and the
 *    hostile PDFs of test/helpers/pdf.ts), on the server the corpus has warmed up (--cold: on the
 *    newly started server, before the corpus): each file uploaded `runs` times, each time under a
 *    name of its own (identical bytes are rendered again all the same: nothing skips the render),
 *    and poppler's `pdftoppm` drawing page 1 of the same file to the same width as many times, in
 *    turns. Median and max ms to the answer (201, or the refusal named), the same for pdftoppm,
 *    and the ratio of the medians.
 * 3. Overall: p50 to 201 against pdftoppm's p50 on the same pages (goal ≤ 1.5×).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { FAITHFUL_DIFFERENCE } from '../test/helpers/poppler.ts';
import { hostilePdfs, makePdf } from '../test/helpers/pdf.ts';
import { BENCH_AUTHORIZATION, BENCH_DOCUMENTS, startBenchApp } from './bench-app.ts';
import { CORPUS, corpusPdfs, judgeCorpusAnswer, percentile, postDocument, summarizeFidelity, timePdftoppm, type Judgement } from './uploads.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '5' }, port: { type: 'string', default: '18091' }, cold: { type: 'boolean', default: false } },
});
const runs = Number(values.runs);
const ANSWER_GOAL_MS = 5_000;
const RATIO_GOAL = 1.5;

/** The families issue 18 names, with the corpus files test/documents/thumbnail-fidelity.test.ts holds them to (and S2.pdf, Type3WordSpacing.pdf of its samples). */
const FAMILIES: [family: string, files: string[]][] = [
  [
    'JBIG2 symbol dictionaries',
    [
      'bitmap-symbol-symbolrefineone-customat.pdf',
      'bitmap-symbol-symhuffrefine-textrefine.pdf',
      'bitmap-symbol-texthuffrefinecustompos.pdf',
      'bitmap-symbol-textbottomlefttranspose.pdf',
    ],
  ],
  ['JPEG 2000', ['issue5475.pdf', 'bug_jpx.pdf', 'S2.pdf']],
  ['soft masks with /BC', ['issue7891_bc0.pdf', 'issue9017_reduced.pdf', 'issue12798_page1_reduced.pdf', 'bug1703683_page2_reduced.pdf']],
  ['standard 14 fonts, not embedded', ['ZapfDingbats.pdf', 'issue4436r.pdf', 'Pages-tree-refs.pdf', 'issue5238.pdf']],
  ['annotation appearances', ['annotation-stamp.pdf', 'tagged_stamp.pdf', 'annotation-text-widget.pdf', 'annotation-choice-widget.pdf']],
  [
    'Type 3 fonts and patterns',
    ['Type3WordSpacing.pdf', 'issue5039.pdf', 'tiling_patterns_variations.pdf', 'tiling-pattern-large-steps.pdf', 'ShowText-ShadingPattern.pdf'],
  ],
];
const HOSTILE = 'hostile PDFs (test/helpers/pdf.ts)';

const fmt = (ms: number) => ms.toFixed(0);
const ratio = (ours: number, poppler: number) => `${(ours / poppler).toFixed(2)}×`;
/** Statuses other than 201, counted: "" when all were 201. */
const refusals = (statuses: readonly number[]) => {
  const counts = new Map<number, number>();
  for (const status of statuses) if (status !== 201) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts].map(([status, count]) => `${count}× ${status}`).join(', ');
};

const startedAt = new Date();
const loadBefore = loadavg();
const { base, work, close } = await startBenchApp({ port: Number(values.port) });
const documentsUrl = `${base!}${BENCH_DOCUMENTS}`;
const out = path.join(work, 'pdftoppm');
const upload = (bytes: Buffer, name: string) => postDocument(documentsUrl, BENCH_AUTHORIZATION, bytes, name);

interface Timed {
  family: string;
  file: string;
  statuses: number[];
  ours: number[];
  poppler: number[];
  popplerOk: boolean[];
  /** For hostile files: whether the stored document shows a rendered page or the placeholder. */
  thumbnail?: string;
}
const timed: Timed[] = [];
const corpus: { file: string; status: number; ms: number; poppler: { ms: number; ok: boolean }; judgement: Judgement }[] = [];
/** 1. The whole corpus, each file once, each seen for the first time. */
async function uploadCorpus(): Promise<void> {
  for (const file of corpusPdfs()) {
    const bytes = readFileSync(path.join(CORPUS, file));
    const answer = await upload(bytes, file);
    const poppler = await timePdftoppm(path.join(CORPUS, file), out);
    const judgement = await judgeCorpusAnswer(path.join(CORPUS, file), answer.status, answer.body);
    corpus.push({ file, status: answer.status, ms: answer.ms, poppler, judgement });
    process.stderr.write(`${file}: ${answer.status} ${fmt(answer.ms)} ms, pdftoppm ${fmt(poppler.ms)} ms${poppler.ok ? '' : ' (failed)'}, ${judgement.kind}\n`);
  }
}

/**
 * 2. Per family, uploads and pdftoppm in turns on each file. By default on the server the corpus has warmed up, as a
 * server that has run a while is: a new render worker draws some pages with fonts or images 2–5× slower until it has
 * drawn a few (most likely its WebAssembly and JavaScript not yet compiled by V8's optimizing tier); --cold, before the corpus.
 */
async function uploadFamilies(): Promise<void> {
  const hostileDir = path.join(work, 'hostile');
  mkdirSync(hostileDir);
  const families = FAMILIES.map(([family, files]): [string, string[]] => [family, files.map((file) => path.join(CORPUS, file))]);
  const hostileFiles: string[] = [];
  for (const [name, bytes] of Object.entries(await hostilePdfs())) {
    hostileFiles.push(path.join(hostileDir, `${name}.pdf`));
    writeFileSync(hostileFiles.at(-1)!, bytes);
  }
  families.push([HOSTILE, hostileFiles]);
  for (const [family, files] of families) {
    for (const file of files) {
      const bytes = readFileSync(file);
      const entry: Timed = { family, file: path.basename(file), statuses: [], ours: [], poppler: [], popplerOk: [] };
      for (let i = 0; i < runs; i++) {
        const answer = await upload(bytes, `${entry.file} #${i + 1}`);
        entry.statuses.push(answer.status);
        entry.ours.push(answer.ms);
        if (family === HOSTILE && i === 0 && answer.location !== null) {
          const stored = await fetch(`${base!}${answer.location}`, { headers: { authorization: BENCH_AUTHORIZATION } });
          entry.thumbnail = ((await stored.json()) as { thumbnail: string }).thumbnail;
        }
        const poppler = await timePdftoppm(file, out);
        entry.poppler.push(poppler.ms);
        entry.popplerOk.push(poppler.ok);
      }
      timed.push(entry);
      process.stderr.write(
        `${family} / ${entry.file}: ours ${entry.ours.map(fmt).join(' ')} ms (${entry.statuses.join(' ')}), pdftoppm ${entry.poppler.map(fmt).join(' ')} ms\n`,
      );
    }
  }
}

try {
  // The server's own first requests (the first hash of the credential, the first JSON) are not any file's.
  for (let i = 0; i < 5; i++) await upload(makePdf([{ width: 595, height: 842, content: '0 0 0 rg 0 0 100 100 re f' }]), `warm-up ${i}`);

  if (values.cold === true) await uploadFamilies();
  await uploadCorpus();
  if (values.cold !== true) await uploadFamilies();
} finally {
  await close();
}
const loadAfter = loadavg();

const lines: string[] = [];
const print = (...text: string[]) => lines.push(...text);
print(
  `Uploads by family, ${startedAt.toISOString().slice(0, 16)}Z, Node ${process.version}, SQLite, HTTP to buildApp on 127.0.0.1:${values.port}, ` +
    `${values.cold ? `${runs} uploads and ${runs} pdftoppm runs per family file in turns on the new server, then the corpus` : `the corpus first, then ${runs} uploads and ${runs} pdftoppm runs per family file in turns`}; load average (1, 5, 15 min) ${loadBefore.map((x) => x.toFixed(2)).join(', ')} before, ` +
    `${loadAfter.map((x) => x.toFixed(2)).join(', ')} after`,
  '',
  '| family | files | signroom median / max ms (to the answer) | pdftoppm median / max ms | ratio of medians | not 201 |',
  '|---|---:|---:|---:|---:|---|',
);
for (const [family] of [...FAMILIES, [HOSTILE]]) {
  const entries = timed.filter((entry) => entry.family === family);
  const ours = entries.flatMap((entry) => entry.ours);
  const poppler = entries.flatMap((entry) => entry.poppler);
  print(
    `| ${family} | ${entries.length} | ${fmt(percentile(ours, 50))} / ${fmt(percentile(ours, 100))} | ${fmt(percentile(poppler, 50))} / ${fmt(percentile(poppler, 100))} | ` +
      `${ratio(percentile(ours, 50), percentile(poppler, 50))} | ${refusals(entries.flatMap((entry) => entry.statuses))} |`,
  );
}
print('', '| file | family | signroom median / max ms | answers | pdftoppm median / max ms | ratio |', '|---|---|---:|---|---:|---:|');
for (const entry of timed) {
  const answers = refusals(entry.statuses) || '201';
  const thumbnail = entry.thumbnail !== undefined ? `, thumbnail ${entry.thumbnail}` : '';
  const failed = entry.popplerOk.includes(false) ? ` (failed ${entry.popplerOk.filter((ok) => !ok).length}×)` : '';
  print(
    `| ${entry.file} | ${entry.family} | ${fmt(percentile(entry.ours, 50))} / ${fmt(percentile(entry.ours, 100))} | ${answers}${thumbnail} | ` +
      `${fmt(percentile(entry.poppler, 50))} / ${fmt(percentile(entry.poppler, 100))}${failed} | ${ratio(percentile(entry.ours, 50), percentile(entry.poppler, 50))} |`,
  );
}

const times = corpus.map((entry) => entry.ms);
const slow = corpus.filter((entry) => entry.ms > ANSWER_GOAL_MS);
const fidelity = summarizeFidelity(corpus);
// The same pages: stored by us (201) and drawn by pdftoppm.
const both = corpus.filter((entry) => entry.status === 201 && entry.poppler.ok);
const familyBoth = timed.flatMap((entry) =>
  entry.ours.flatMap((ms, i) => (entry.statuses[i] === 201 && entry.popplerOk[i] === true ? [{ ours: ms, poppler: entry.poppler[i]! }] : [])),
);
const overall = (pairs: { ours: number; poppler: number }[]) => {
  const ours = percentile(
    pairs.map((pair) => pair.ours),
    50,
  );
  const poppler = percentile(
    pairs.map((pair) => pair.poppler),
    50,
  );
  return `${fmt(ours)} / ${fmt(poppler)} ms = ${ratio(ours, poppler)}`;
};
print(
  '',
  '| measure | value | goal |',
  '|---|---:|---|',
  `| corpus: PDFs uploaded once each | ${corpus.length} | |`,
  `| corpus: time to the answer, p50 / p95 / max | ${fmt(percentile(times, 50))} / ${fmt(percentile(times, 95))} / ${fmt(percentile(times, 100))} ms | max ≤ ${ANSWER_GOAL_MS} ms |`,
  `| corpus: answers over ${ANSWER_GOAL_MS / 1000} s | ${slow.length}${slow.length > 0 ? ` (${slow.map((entry) => `${entry.file} ${fmt(entry.ms)} ms`).join(', ')})` : ''} | 0 |`,
  `| families (hostile included): slowest answer | ${fmt(Math.max(...timed.flatMap((entry) => entry.ours)))} ms | ≤ ${ANSWER_GOAL_MS} ms |`,
  `| corpus: poppler draws page 1 (encrypted aside: ${fidelity.encrypted.length}) | ${fidelity.popplerDraws} | |`,
  `| corpus: thumbnails within ${FAITHFUL_DIFFERENCE} of poppler (refused ones count as not) | ${fidelity.faithful} (${((100 * fidelity.faithful) / Math.max(1, fidelity.popplerDraws)).toFixed(1)}%) | ≥ 97% |`,
  `| corpus: blank where poppler draws | ${fidelity.blanks.length}${fidelity.blanks.length > 0 ? ` (${fidelity.blanks.join(', ')})` : ''} | 0 |`,
  `| corpus: refused although poppler draws page 1 | ${fidelity.refused.length}${fidelity.refused.length > 0 ? ` (${fidelity.refused.join(', ')})` : ''} | |`,
  `| p50 to 201 vs pdftoppm p50, the family files (${familyBoth.length} uploads answered 201 and drawn by poppler) | ${overall(familyBoth)} | ≤ ${RATIO_GOAL}× |`,
  `| p50 to 201 vs pdftoppm p50, the corpus (${both.length} files stored and drawn by poppler) | ${overall(both.map((entry) => ({ ours: entry.ms, poppler: entry.poppler.ms })))} | ≤ ${RATIO_GOAL}× |`,
  '',
  `Slowest answers of the corpus: ${[...corpus]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 5)
    .map((entry) => `${entry.file} ${fmt(entry.ms)} ms (${entry.status})`)
    .join(', ')}`,
);
console.log(`\n${lines.join('\n')}`);
