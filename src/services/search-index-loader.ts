import { Worker } from 'node:worker_threads';
import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/tables.ts';
import { SearchIndexBuilder, type SearchIndexParts } from '../domain/search-index.ts';
import { SORT_FIELDS } from '../domain/signatory-rules.ts';
import {
  findDirectoryVersion,
  findOrganizationSize,
  readIndexedUsers,
  readRoomMemberSeqs,
  readSortOrder,
  type SortPosition,
} from '../repositories/search-index-repository.ts';

/** What a loader reads: an organization's index (unless it is too small or too large), or a room's members at a version. */
export type LoadJob =
  | { kind: 'organization'; orgId: string; minUsers: number; maxUsers: number }
  | { kind: 'room'; orgId: string; roomId: string; version: number };

export type LoadResult =
  | { kind: 'index'; parts: SearchIndexParts }
  | { kind: 'skipped'; version: number; users: number }
  | { kind: 'members'; seqs: Float64Array }
  /** The organization is gone, or (a room) no longer at the version asked for. */
  | { kind: 'stale' };

/** Rows per statement: the worker's heap stays small while it reads. */
const PIECE = 10_000;

/**
 * Reads what the job asks for, in one read-only snapshot (a repeatable-read
 * transaction; on SQLite, a read transaction of its own connection), so the
 * pieces fit together whatever commits meanwhile.
 */
export async function readLoadJob(db: Kysely<Database>, job: LoadJob): Promise<LoadResult> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute((trx) => (job.kind === 'organization' ? readOrganization(trx, job) : readRoom(trx, job)));
}

async function readOrganization(db: Kysely<Database>, job: Extract<LoadJob, { kind: 'organization' }>): Promise<LoadResult> {
  const size = await findOrganizationSize(db, job.orgId);
  if (size === undefined) return { kind: 'stale' };
  if (size.users < job.minUsers || size.users > job.maxUsers) return { kind: 'skipped', ...size };
  const builder = new SearchIndexBuilder(size.version, size.users);
  for (let after = -1; ; ) {
    const users = await readIndexedUsers(db, job.orgId, after, PIECE);
    builder.addUsers(users);
    if (users.length < PIECE) break;
    after = users.at(-1)!.seq;
  }
  for (const field of SORT_FIELDS) {
    for (let after: SortPosition | undefined; ; ) {
      const read = await readSortOrder(db, job.orgId, field, after, PIECE);
      builder.addOrder(field, read.seqs);
      if (read.seqs.length < PIECE) break;
      after = read.last;
    }
  }
  const parts = builder.parts();
  if (parts === undefined) throw new Error(`the users of organization "${job.orgId}" did not add up to its tallies`);
  return { kind: 'index', parts };
}

async function readRoom(db: Kysely<Database>, job: Extract<LoadJob, { kind: 'room' }>): Promise<LoadResult> {
  if ((await findDirectoryVersion(db, job.orgId)) !== job.version) return { kind: 'stale' };
  const seqs: number[] = [];
  for (let after = ''; ; ) {
    const read = await readRoomMemberSeqs(db, job.orgId, job.roomId, after, PIECE);
    seqs.push(...read.seqs);
    if (read.seqs.length < PIECE) break;
    after = read.last!;
  }
  return { kind: 'members', seqs: Float64Array.from(seqs) };
}

const WORKER = new URL('./search-index-worker.ts', import.meta.url);

/**
 * A small heap for the worker: what it keeps is in typed arrays outside it, and
 * the process keeps the pages of a worker's heap after the worker ends
 * (measured: a million users read with the default heap left the server 400
 * MB larger; with these limits, about 50 MB).
 */
const WORKER_HEAP = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 64 };

/** A load running in a worker thread; cancel() stops it (the result then rejects). */
export interface RunningLoad {
  result: Promise<LoadResult>;
  cancel(): Promise<void>;
}

/**
 * Runs a job in a worker thread with its own database connection and a small
 * heap: the request thread keeps serving while it reads, and its own heap does
 * not grow with the rows read. The arrays are handed over, not copied.
 */
export function loadInWorker(config: Config, job: LoadJob): RunningLoad {
  const worker = new Worker(WORKER, { workerData: { config, job }, resourceLimits: WORKER_HEAP });
  const result = new Promise<LoadResult>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the search index loader stopped (exit code ${code})`)));
  });
  return { result, cancel: async () => void (await worker.terminate()) };
}
