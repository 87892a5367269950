/**
 * What the upload benches share: posting a document over HTTP, timing poppler's `pdftoppm` on the
 * same file, percentiles, and judging a corpus file's thumbnail against poppler's page 1 by the
 * rule of test/documents/corpus-fidelity.once.test.ts.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { corpusDir } from '../test/helpers/corpus.ts';
import { compareWithPoppler, FAITHFUL_DIFFERENCE, popplerPage1, type Comparison } from '../test/helpers/poppler.ts';

const exec = promisify(execFile);

/** The shared PDF corpus (../shared/pdf-corpus beside the checkout). */
export const CORPUS = corpusDir();

/** The PDFs of the corpus, by name, sorted; only those whose name contains `only` when given. */
export function corpusPdfs(only?: string): string[] {
  return readdirSync(CORPUS)
    .filter((name) => name.toLowerCase().endsWith('.pdf') && (only === undefined || name.includes(only)))
    .sort();
}

/** The `p`th percentile (0–100) of `values`, by rank (the median is percentile 50); 0 when there are none. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

export interface Answer {
  status: number;
  /** From sending the request to the end of the answer's body. */
  ms: number;
  body: string;
  location: string | null;
}

/** POSTs `bytes` as a document (JSON, base64 payload, with `name` when given) and times it to the end of the answer. */
export async function postDocument(documentsUrl: string, authorization: string, bytes: Buffer, name?: string): Promise<Answer> {
  const started = performance.now();
  const response = await fetch(documentsUrl, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ payload: bytes.toString('base64'), ...(name !== undefined ? { name } : {}) }),
  });
  const body = await response.text();
  return { status: response.status, ms: performance.now() - started, body, location: response.headers.get('location') };
}

/**
 * One run of poppler as the upload benches compare with: page 1 scaled to 200 px wide, a fresh
 * process each time, as poppler is used (`pdftoppm -f 1 -l 1 -scale-to-x 200 -scale-to-y -1 -png`),
 * writing under `outPrefix`. Its time, and whether it succeeded (stopped after 60 s).
 */
export async function timePdftoppm(file: string, outPrefix: string): Promise<{ ms: number; ok: boolean }> {
  const started = performance.now();
  const ok = await exec('pdftoppm', ['-f', '1', '-l', '1', '-scale-to-x', '200', '-scale-to-y', '-1', '-png', file, outPrefix], { timeout: 60_000 }).then(
    () => true,
    () => false,
  );
  return { ms: performance.now() - started, ok };
}

/** How a corpus file's answer counts for thumbnail fidelity. */
export type Judgement =
  /** Poppler cannot draw page 1: not counted. */
  | { kind: 'poppler-cannot' }
  /** Answered 422 document-encrypted, and the file has an /Encrypt dictionary: poppler lacks its security handler and draws garbage, so not counted. */
  | { kind: 'encrypted' }
  /** Poppler draws page 1 and we refused the file: the user sees no page, so it counts, as not faithful. */
  | { kind: 'refused' }
  /** Stored, and compared with poppler's page 1. */
  | { kind: 'compared'; comparison: Comparison };

/** Judges the answer to uploading the corpus file `file` by the rule of test/documents/corpus-fidelity.once.test.ts. */
export async function judgeCorpusAnswer(file: string, status: number, body: string): Promise<Judgement> {
  const poppler = await popplerPage1(file, 200);
  if (poppler === undefined) return { kind: 'poppler-cannot' };
  if (status !== 201) {
    const code = status === 422 ? (JSON.parse(body) as { code?: string }).code : undefined;
    return code === 'document-encrypted' && hasEncryptDictionary(file) ? { kind: 'encrypted' } : { kind: 'refused' };
  }
  const thumbnail = Buffer.from((JSON.parse(body) as { thumbnail: string }).thumbnail.replace(/^data:image\/png;base64,/, ''), 'base64');
  return { kind: 'compared', comparison: await compareWithPoppler(thumbnail, poppler) };
}

/** Whether the file's trailer names an /Encrypt dictionary (the bytes say so, whatever any renderer makes of them). */
function hasEncryptDictionary(file: string): boolean {
  return /\/Encrypt\s+(\d+\s+\d+\s+R|<<)/.test(readFileSync(file, 'latin1'));
}

export interface FidelitySummary {
  /** Poppler draws page 1: compared, or refused by us. */
  popplerDraws: number;
  faithful: number;
  blanks: string[];
  refused: string[];
  encrypted: string[];
}

/** Sums up judged files: the faithful share is `faithful / popplerDraws`. */
export function summarizeFidelity(judged: readonly { file: string; judgement: Judgement }[]): FidelitySummary {
  const named = (kind: Judgement['kind']) => judged.filter((entry) => entry.judgement.kind === kind).map((entry) => path.basename(entry.file));
  const compared = judged.flatMap((entry) => (entry.judgement.kind === 'compared' ? [{ file: entry.file, ...entry.judgement.comparison }] : []));
  return {
    popplerDraws: compared.length + named('refused').length,
    faithful: compared.filter((entry) => entry.difference <= FAITHFUL_DIFFERENCE && !entry.blank).length,
    blanks: compared.filter((entry) => entry.blank).map((entry) => path.basename(entry.file)),
    refused: named('refused'),
    encrypted: named('encrypted'),
  };
}
