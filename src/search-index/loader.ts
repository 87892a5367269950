import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { open, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import { preferIndexWalks } from '../db/dialect-sql.ts';
import type { Database } from '../db/tables.ts';
import { arraysOfParts, emptyParts, SearchIndexBuilder, type ChangedUser, type SearchIndexParts } from '../domain/search-index.ts';
import { SORT_FIELDS } from '../domain/signatory-rules.ts';
import { listRooms, type DirectoryScope } from '../repositories/directory-repository.ts';
import {
  findDirectoryStamp,
  findDirectoryVersion,
  findOrganizationSize,
  readChangesAtOnce,
  type OrganizationChanges,
  readIndexedUsers,
  readRoomMemberSeqs,
  readSortOrder,
  type SortPosition,
} from '../repositories/search-index-repository.ts';
import { isListed, snapshotState, writeSnapshot } from './snapshots.ts';
import { isRunning } from '../lib/process-running.ts';

/**
 * What is read for the in-memory search indexes: an organization's index (unless it is too small or
 * too large), a room's members at a version, or the members of its largest rooms (not those in
 * `skip`: at most `maxRooms` rooms, `maxMembers` members in all), each in a loading process of
 * its own; or what changed in an organization since a version (unless more than `maxChanges`
 * users did), a few rows the server reads itself.
 */
export type LoadJob =
  | { kind: 'organization'; orgId: string; minUsers: number; maxUsers: number }
  /** `scopeRooms`: the rooms whose lookups' scope is read with the changes (readChangesAtOnce). */
  | { kind: 'changes'; orgId: string; since: number; maxChanges: number; scopeRooms?: readonly string[] }
  | { kind: 'room'; orgId: string; roomId: string }
  | { kind: 'rooms'; orgId: string; skip: readonly string[]; maxRooms: number; maxMembers: number };

export type LoadResult =
  /** `fromSnapshot`: taken from the copy kept on disk by the server (search-indexes.ts), not read by a loader. */
  | { kind: 'index'; parts: SearchIndexParts; fromSnapshot?: boolean }
  | { kind: 'skipped'; version: number; users: number }
  /** A room's members at `version`. */
  | { kind: 'members'; version: number; seqs: Float64Array }
  /** The members of rooms at `version`, largest room first: each room's seqs in turn, `members` of them. */
  | { kind: 'rooms'; version: number; rooms: { roomId: string; members: number }[]; seqs: Float64Array }
  /**
   * The organization at `version`, of `users` users: those changed since (with their rooms), the
   * rooms whose member lists were replaced, and those one of whose members came or went; `scope`:
   * the organization as lookups of the rooms asked for read it, at `version`.
   */
  | { kind: 'changes'; version: number; users: number; changed: ChangedUser[]; rooms: string[]; editedRooms: string[]; scope?: DirectoryScope }
  /** More users changed than the job allows: the index is better read whole (the version, the rooms replaced or edited, and the scope, still). */
  | { kind: 'many changes'; version: number; rooms: string[]; editedRooms: string[]; scope?: DirectoryScope }
  /** The organization is gone. */
  | { kind: 'stale' };

/** Rows per statement: the worker's heap stays small while it reads. */
const PIECE = 10_000;

/**
 * Reads what the job asks for, in one read-only snapshot (a repeatable-read
 * transaction; on SQLite, a read transaction of its own connection), so the
 * pieces fit together whatever commits meanwhile. An organization's index is
 * also kept as a copy in `snapshots`, if given (see snapshots.ts),
 * once the transaction is over.
 */
export async function readLoadJob(db: Kysely<Database>, job: LoadJob, options: { snapshots?: string } = {}): Promise<LoadResult> {
  // One statement is one snapshot: no transaction needed.
  if (job.kind === 'changes') return changesOf(await readChangesAtOnce(db, job.orgId, job.since, job.maxChanges + 1, job.scopeRooms), job);
  const { result, stamp } = await db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx): Promise<{ result: LoadResult; stamp?: string | undefined }> => {
      await preferIndexWalks(trx);
      if (job.kind === 'organization') return readOrganization(trx, job, options.snapshots !== undefined);
      if (job.kind === 'rooms') return { result: await readLargestRooms(trx, job) };
      return { result: await readRoom(trx, job) };
    });
  // Only of a version the database lists with its stamp, and not over a copy of a later state the
  // database lists (an import's, written while this read ran). A copy that cannot be written (a
  // read-only data directory) costs only the next start its speed.
  if (result.kind === 'index' && stamp !== undefined && !(await hasListedCopyAfter(db, options.snapshots!, job.orgId, result.parts.version))) {
    await writeSnapshot(options.snapshots!, job.orgId, { version: result.parts.version, stamp }, result.parts).catch(() => undefined);
  }
  return result;
}

/** Whether the organization's copy in `directory` is of a state after `version` that the database lists. */
async function hasListedCopyAfter(db: Kysely<Database>, directory: string, orgId: string, version: number): Promise<boolean> {
  const state = await snapshotState(directory, orgId);
  return state !== undefined && state.version > version && (await isListed(db, orgId, state));
}

/** The organization's index, read from the database; and, if `withStamp`, the stamp its version is listed with. */
async function readOrganization(
  db: Kysely<Database>,
  job: Extract<LoadJob, { kind: 'organization' }>,
  withStamp: boolean,
): Promise<{ result: LoadResult; stamp?: string | undefined }> {
  const size = await findOrganizationSize(db, job.orgId);
  if (size === undefined) return { result: { kind: 'stale' } };
  if (size.users < job.minUsers || size.users > job.maxUsers) return { result: { kind: 'skipped', version: size.version, users: size.users } };
  const parts = await readIndexParts(db, job.orgId, size);
  return { result: { kind: 'index', parts }, stamp: withStamp ? await findDirectoryStamp(db, job.orgId, size.version) : undefined };
}

/** The organization's index, read in pieces; `size` is its version and users as the same snapshot sees them. */
export async function readIndexParts(db: Kysely<Database>, orgId: string, size: { version: number; users: number }): Promise<SearchIndexParts> {
  const builder = new SearchIndexBuilder(size.version, size.users);
  for (let after = -1; ;) {
    const users = await readIndexedUsers(db, orgId, after, PIECE);
    builder.addUsers(users);
    if (users.length < PIECE) break;
    after = users.at(-1)!.seq;
  }
  for (const field of SORT_FIELDS) {
    for (let after: SortPosition | undefined; ;) {
      const read = await readSortOrder(db, orgId, field, after, PIECE);
      builder.addOrder(field, read.seqs);
      if (read.seqs.length < PIECE) break;
      after = read.last;
    }
  }
  const parts = builder.parts();
  if (parts === undefined) throw new Error(`the users of organization "${orgId}" did not add up to its tallies`);
  return parts;
}

function changesOf(read: OrganizationChanges | undefined, job: Extract<LoadJob, { kind: 'changes' }>): LoadResult {
  if (read === undefined) return { kind: 'stale' };
  const { size, changed, rooms, scope } = read;
  if (changed.length > job.maxChanges) return { kind: 'many changes', version: size.version, rooms: rooms.replaced, editedRooms: rooms.edited, scope };
  return { kind: 'changes', version: size.version, users: size.users, changed, rooms: rooms.replaced, editedRooms: rooms.edited, scope };
}

/** The room's members at the version this snapshot reads (the index brings them up to its own: SearchIndexes.#membersAt). */
async function readRoom(db: Kysely<Database>, job: Extract<LoadJob, { kind: 'room' }>): Promise<LoadResult> {
  const version = await findDirectoryVersion(db, job.orgId);
  if (version === undefined) return { kind: 'stale' };
  return { kind: 'members', version, seqs: Float64Array.from(await readMemberSeqs(db, job.orgId, job.roomId)) };
}

/** The seqs of a room's members, read in pieces. */
async function readMemberSeqs(db: Kysely<Database>, orgId: string, roomId: string): Promise<number[]> {
  const seqs: number[] = [];
  for (let after = ''; ;) {
    const read = await readRoomMemberSeqs(db, orgId, roomId, after, PIECE);
    seqs.push(...read.seqs);
    if (read.seqs.length < PIECE) break;
    after = read.last!;
  }
  return seqs;
}

/** Rooms listed at a time, and listed at most, when the largest are looked for (an organization with more has the first by id looked at). */
const ROOMS_PIECE = 1_000;
const ROOMS_LISTED = 100_000;

/**
 * The members of the organization's largest rooms (by their tallies), largest first, at the
 * version this snapshot reads: as many rooms as the job allows, skipping those it names, rooms
 * without members, and rooms whose members would take those read past `maxMembers`.
 */
async function readLargestRooms(db: Kysely<Database>, job: Extract<LoadJob, { kind: 'rooms' }>): Promise<LoadResult> {
  const version = await findDirectoryVersion(db, job.orgId);
  if (version === undefined) return { kind: 'stale' };
  const skip = new Set(job.skip);
  const listed: { roomId: string; members: number }[] = [];
  for (let offset = 0; offset < ROOMS_LISTED; offset += ROOMS_PIECE) {
    const { rows } = await listRooms(db, job.orgId, offset, ROOMS_PIECE);
    for (const room of rows) if (room.member_count > 0 && !skip.has(room.id)) listed.push({ roomId: room.id, members: room.member_count });
    if (rows.length < ROOMS_PIECE) break;
  }
  listed.sort((a, b) => b.members - a.members || (a.roomId < b.roomId ? -1 : 1));
  const rooms: { roomId: string; members: number }[] = [];
  const seqs: number[] = [];
  for (const { roomId, members } of listed.slice(0, job.maxRooms)) {
    if (seqs.length + members > job.maxMembers) continue;
    const read = await readMemberSeqs(db, job.orgId, roomId);
    rooms.push({ roomId, members: read.length });
    for (const seq of read) seqs.push(seq);
  }
  return { kind: 'rooms', version, rooms, seqs: Float64Array.from(seqs) };
}

/** How a result file's name starts; the server's pid follows. */
const RESULT_FILE = 'signroom-search-index-';
const RESULT_FILE_NAME = new RegExp(`^${RESULT_FILE}(\\d+)-[0-9a-f-]{36}$`);

/** This process's result files not yet read back. */
const inFlight = new Set<string>();

/**
 * Removes the result files of servers no longer running (killed while a loader's result was on
 * its way), and this process's own that it is not waiting for (a container restarted keeps its
 * /tmp, and often its pid): run at start. Files are otherwise removed as they are read.
 */
export async function removeOrphanedResults(directory = tmpdir()): Promise<number> {
  let removed = 0;
  for (const name of await readdir(directory).catch(() => [])) {
    const pid = RESULT_FILE_NAME.exec(name)?.[1];
    if (pid === undefined) continue;
    const file = path.join(directory, name);
    if (Number(pid) === process.pid ? inFlight.has(file) : isRunning(Number(pid))) continue;
    await rm(file, { force: true });
    removed += 1;
  }
  return removed;
}

const LOADER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** A load running in a process of its own; cancel() stops it (the result then rejects). */
export interface RunningLoad {
  result: Promise<LoadResult>;
  cancel(): Promise<void>;
}

/** What the loading process sends back: the result, with its arrays left in `file` (see writeResult). */
type LoaderReply = { result: LoadResult } | { error: string };

/**
 * Runs a job in a child process with its own database connection: the request
 * thread keeps serving while it reads, and all the memory the reading takes
 * goes back to the system when the process ends. (In a worker thread, the
 * server stayed larger for good beyond the index: the thread's heap pages
 * stay with the process; sent over the IPC channel, the arrays were copied on
 * the way.) The arrays come back through a
 * temporary file, read straight into arrays of their exact size.
 */
export function loadInProcess(config: Config, job: LoadJob): RunningLoad {
  const file = path.join(tmpdir(), `${RESULT_FILE}${process.pid}-${randomUUID()}`);
  inFlight.add(file);
  const child = fork(LOADER, [], {
    execArgv: ['--max-old-space-size=256', '--disable-warning=ExperimentalWarning'],
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const reply = new Promise<LoaderReply>((resolve, reject) => {
    child.once('message', resolve);
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`the search index loader stopped (${signal ?? `exit code ${code}`})`)));
  });
  child.send({ config, job, file });
  const result = (async () => {
    try {
      const answer = await reply;
      if ('error' in answer) throw new Error(answer.error);
      return await readResult(answer.result, file);
    } finally {
      await rm(file, { force: true });
      inFlight.delete(file);
    }
  })();
  return {
    result,
    cancel: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The arrays of a result, in the order they are written to the file. */
function arraysOf(result: LoadResult): ArrayBufferView[] {
  if (result.kind === 'members' || result.kind === 'rooms') return [result.seqs];
  return result.kind === 'index' ? arraysOfParts(result.parts) : [];
}

/** Writes a result's arrays to `file`, and returns it with empty arrays of the same lengths in their place. */
export async function writeResult(result: LoadResult, file: string): Promise<LoadResult> {
  const handle = await open(file, 'w', 0o600);
  try {
    for (const array of arraysOf(result)) await handle.write(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
  } finally {
    await handle.close();
  }
  return hollow(result);
}

/** The result with each array replaced by its length: what crosses the IPC channel. */
function hollow(result: LoadResult): LoadResult {
  const lengths = (array: { length: number }) => ({ length: array.length }) as never;
  if (result.kind === 'members') return { ...result, seqs: lengths(result.seqs) };
  if (result.kind === 'rooms') return { ...result, seqs: lengths(result.seqs) };
  if (result.kind !== 'index') return result;
  const { parts } = result;
  return {
    kind: 'index',
    parts: {
      version: parts.version,
      keys: lengths(parts.keys),
      starts: lengths(parts.starts),
      kinds: lengths(parts.kinds),
      seqs: lengths(parts.seqs),
      orders: { lastname: lengths(parts.orders.lastname), firstname: lengths(parts.orders.firstname), email: lengths(parts.orders.email) },
    },
  };
}

/** Reads the arrays of a hollow result back from `file`, each into an array of its own. */
async function readResult(hollowResult: LoadResult, file: string): Promise<LoadResult> {
  let full: LoadResult = hollowResult;
  if (hollowResult.kind === 'members') full = { ...hollowResult, seqs: new Float64Array(hollowResult.seqs.length) };
  if (hollowResult.kind === 'rooms') full = { ...hollowResult, seqs: new Float64Array(hollowResult.seqs.length) };
  if (hollowResult.kind === 'index') {
    const { parts } = hollowResult;
    full = { kind: 'index', parts: emptyParts(parts.version, parts.seqs.length, parts.keys.length) };
  }
  const arrays = arraysOf(full);
  if (arrays.length === 0) return full;
  const handle = await open(file, 'r');
  try {
    for (const array of arrays) {
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      const { bytesRead } = await handle.read(bytes, 0, bytes.byteLength, null);
      if (bytesRead !== bytes.byteLength) throw new Error('the search index loader wrote less than it said');
    }
  } finally {
    await handle.close();
  }
  return full;
}
