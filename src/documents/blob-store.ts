import { createHash, randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/tables.ts';
import { isRunning } from '../lib/process-running.ts';

/** Bytes written durably but not yet part of the store: commit or discard them. */
export interface StagedBlob {
  readonly sha256: string;
  /** A file holding the bytes, readable until the blob is committed or discarded. */
  readonly path: string;
}

/**
 * Where document bytes live, addressed by their SHA-256: files under the data
 * directory (SQLite), or tables of PostgreSQL, which every instance reaches.
 * A later issue may add object storage.
 */
export interface BlobStore {
  /** Writes the bytes to a local temporary file and fsyncs it; nothing is stored until commit. */
  stage(bytes: Buffer): Promise<StagedBlob>;
  /**
   * Stores staged bytes, called inside the transaction that records their
   * document after lockBlob: durably before the row commits (files), or as part
   * of that very transaction (PostgreSQL). Identical bytes are stored once.
   */
  commit(staged: StagedBlob, trx: Transaction<Database>): Promise<void>;
  /** Forgets staged bytes. */
  discard(staged: StagedBlob): Promise<void>;
  /** The bytes, or undefined when no blob has that hash. */
  get(sha256: string): Promise<Buffer | undefined>;
  /** Deletes a blob whose last document was deleted (kept if a document refers to it again). */
  delete(sha256: string): Promise<void>;
  /** Removes what interrupted work left behind: temporary files, and blobs no document refers to. */
  recover(referenced: () => Promise<Set<string>>): Promise<{ temporaryFiles: number; orphanBlobs: number }>;
  /** This process stops using the store (its files stay). */
  close(): Promise<void>;
}

/**
 * Serialises, across processes, the transactions that store or delete one
 * blob's documents (PostgreSQL advisory lock, released at commit). SQLite needs
 * none: its one writer at a time, and the per-process lock, already do it.
 */
export async function lockBlob(trx: Transaction<Database>, sha256: string, dialect: 'sqlite' | 'postgres'): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtextextended(${`blob:${sha256}`}, 0))`.execute(trx);
}

/** The store for a database: PostgreSQL's blob tables, or files under `<dataDir>/blobs`. Staging is always local. */
export async function openBlobStore(database: { db: Kysely<Database>; dialect: 'sqlite' | 'postgres' }, dataDir: string): Promise<BlobStore> {
  const dir = path.join(dataDir, 'blobs');
  const store = database.dialect === 'postgres' ? new PostgresBlobStore(database.db, dir) : new FileBlobStore(dir);
  await store.init();
  return store;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * Blobs as files under `<dir>/<first two hex digits>/<sha256>`. A write goes to
 * a temporary file (staged), is fsync'd, renamed into place, and the directory
 * is fsync'd, so a crash leaves either the whole blob or only a temporary file.
 */
export class FileBlobStore implements BlobStore {
  readonly #dir: string;
  readonly #tmp: string;
  /** One empty file per process using this directory, `pid@host`, touched while it runs (see recover). */
  readonly #users: string;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(dir: string) {
    this.#dir = dir;
    this.#tmp = path.join(dir, 'tmp');
    this.#users = path.join(dir, 'processes');
  }

  async init(): Promise<void> {
    await mkdir(this.#tmp, { recursive: true });
    await mkdir(this.#users, { recursive: true });
    const marker = path.join(this.#users, THIS_PROCESS);
    await writeFile(marker, '');
    // Processes on other hosts (containers sharing the volume) cannot be asked whether they run: they
    // do while they write their file (again, should another have taken it for an ended one's).
    this.#heartbeat = setInterval(() => void writeFile(marker, '').catch(() => undefined), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** This process no longer uses the directory. */
  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    await rm(path.join(this.#users, THIS_PROCESS), { force: true });
  }

  #path(sha256: string): string {
    if (!SHA256_HEX.test(sha256)) throw new Error('not a SHA-256 hex digest');
    return path.join(this.#dir, sha256.slice(0, 2), sha256);
  }

  async stage(bytes: Buffer): Promise<StagedBlob> {
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const temporary = path.join(this.#tmp, `${THIS_PROCESS}.${randomUUID()}.part`);
    const file = await open(temporary, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o640);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    return { sha256, path: temporary };
  }

  async commit(staged: StagedBlob, _trx?: Transaction<Database>): Promise<void> {
    const target = this.#path(staged.sha256);
    if (await exists(target)) {
      await this.discard(staged);
      return;
    }
    const shard = path.dirname(target);
    const shardCreated = (await mkdir(shard, { recursive: true })) !== undefined;
    try {
      await rename(staged.path, target);
    } catch (error) {
      await this.discard(staged);
      throw error;
    }
    await syncDirectory(shard);
    if (shardCreated) await syncDirectory(this.#dir);
  }

  async discard(staged: StagedBlob): Promise<void> {
    await unlink(staged.path).catch(() => undefined);
  }

  async get(sha256: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.#path(sha256));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(sha256: string): Promise<void> {
    await rm(this.#path(sha256), { force: true });
  }

  async list(): Promise<string[]> {
    const hashes: string[] = [];
    for (const shard of await readdir(this.#dir)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of await readdir(path.join(this.#dir, shard))) {
        if (SHA256_HEX.test(name) && name.startsWith(shard)) hashes.push(name);
      }
    }
    return hashes;
  }

  /**
   * Several processes may serve one SQLite data directory (docs/operations.md), so what another
   * process is doing must not look left behind to one starting: temporary files are named by their
   * process and kept while it runs, and blobs no document names are deleted only while no other
   * process uses the directory, asked again before each (one may have put a blob in place and be
   * about to commit the row that names it; deleting it then would lose an acknowledged upload).
   */
  async recover(referenced: () => Promise<Set<string>>): Promise<{ temporaryFiles: number; orphanBlobs: number }> {
    const temporaryFiles = await this.removeTemporaryFiles();
    if ((await this.#otherUsers()).size > 0) return { temporaryFiles, orphanBlobs: 0 };
    const inUse = await referenced();
    let orphanBlobs = 0;
    for (const sha256 of await this.list()) {
      if (inUse.has(sha256)) continue;
      if ((await this.#otherUsers()).size > 0) break;
      await this.delete(sha256);
      orphanBlobs++;
    }
    return { temporaryFiles, orphanBlobs };
  }

  /**
   * Removes the temporary files of processes that have ended, this one's earlier life included (a
   * container's process has the same pid each start); how many. Called at start, before any upload.
   */
  async removeTemporaryFiles(): Promise<number> {
    const others = await this.#otherUsers();
    let removed = 0;
    for (const name of await readdir(this.#tmp)) {
      const writer = /^(\d+@[^/]+?)\.[0-9a-f-]{36}\.part$/.exec(name)?.[1];
      // Named by a process still running, or by none (an older version's) while another runs: kept.
      if (writer !== undefined ? others.has(writer) : others.size > 0) continue;
      await rm(path.join(this.#tmp, name), { force: true });
      removed++;
    }
    return removed;
  }

  /** The other processes using this directory that still run (`pid@host`); those that ended are forgotten. */
  async #otherUsers(): Promise<Set<string>> {
    const running = new Set<string>();
    for (const name of await readdir(this.#users).catch((): string[] => [])) {
      const found = /^(\d+)@(.+)$/.exec(name);
      if (found === null || name === THIS_PROCESS) continue;
      const file = path.join(this.#users, name);
      const runs = found[2] === HOST ? isRunning(Number(found[1])) : Date.now() - ((await stat(file).catch(() => undefined))?.mtimeMs ?? 0) < HEARTBEAT_MS * 5;
      if (runs) running.add(name);
      else await rm(file, { force: true });
    }
    return running;
  }
}

/** This process, as it names its files in a blob directory: its pid and its host. */
const THIS_PROCESS = `${process.pid}@${hostname()}`;
const HOST = hostname();
/** How often a process touches its file in a blob directory; five times this without, it is taken to have ended. */
const HEARTBEAT_MS = 60_000;

/**
 * Bytes per row of `blob_chunks` (PostgreSQL), each sent by a statement of its
 * own. node-pg copies every parameter into a fresh send buffer, garbage once
 * sent; at 64 KiB a statement allocates enough besides that the garbage
 * collector frees those buffers as the upload goes. With 1 MiB chunks the
 * whole document's worth piled up first.
 */
export const BLOB_CHUNK_BYTES = 64 * 1024;
/** Chunks fetched per statement when reading (1 MiB): fewer round trips, and less memory than one by one. */
const CHUNKS_PER_READ = 16;

/**
 * Blobs in PostgreSQL, so every instance reads every document without a shared
 * volume; a blob commits in the same transaction as its document row. One row
 * of `blobs` per blob (its size), its bytes in rows of `blob_chunks` (64 KiB,
 * numbered from 0) that go with it when it is deleted. Chunks keep the
 * server's memory to a few at a time: node-pg copies a parameter whole into
 * its send buffer and receives a bytea as hex text, so a document as one value
 * cost several times its size each way (docs/benchmarks.md). Staging stays
 * local (a file the render worker reads).
 */
export class PostgresBlobStore implements BlobStore {
  readonly #db: Kysely<Database>;
  readonly #staging: FileBlobStore;

  constructor(db: Kysely<Database>, stagingDir: string) {
    this.#db = db;
    this.#staging = new FileBlobStore(stagingDir);
  }

  async init(): Promise<void> {
    await this.#staging.init();
  }

  close(): Promise<void> {
    return this.#staging.close();
  }

  stage(bytes: Buffer): Promise<StagedBlob> {
    return this.#staging.stage(bytes);
  }

  async commit(staged: StagedBlob, trx: Transaction<Database>): Promise<void> {
    const file = await open(staged.path, 'r');
    try {
      const { size } = await file.stat();
      const stored = await trx
        .insertInto('blobs')
        .values({ sha256: staged.sha256, size_bytes: size })
        .onConflict((oc) => oc.column('sha256').doNothing())
        .returning('sha256')
        .executeTakeFirst();
      // Nothing inserted: the same bytes are stored already (under this blob's lock, so completely).
      if (stored !== undefined) {
        // One buffer for every chunk: the driver copies it out before its statement completes.
        const buffer = Buffer.allocUnsafe(Math.min(size, BLOB_CHUNK_BYTES));
        let offset = 0;
        let seq = 0;
        do {
          const length = Math.min(BLOB_CHUNK_BYTES, size - offset);
          await readFully(file, buffer.subarray(0, length), offset);
          await trx
            .insertInto('blob_chunks')
            .values({ sha256: staged.sha256, seq, bytes: buffer.subarray(0, length) })
            .execute();
          offset += length;
          seq++;
        } while (offset < size);
      }
    } finally {
      await file.close();
    }
    await this.#staging.discard(staged);
  }

  discard(staged: StagedBlob): Promise<void> {
    return this.#staging.discard(staged);
  }

  /** Reads the chunks, a few at a time, into a buffer of the blob's size, all from one snapshot (a blob deleted meanwhile is still read whole). */
  async get(sha256: string): Promise<Buffer | undefined> {
    return this.#db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(async (trx) => {
        const blob = await trx.selectFrom('blobs').select('size_bytes').where('sha256', '=', sha256).executeTakeFirst();
        if (blob === undefined) return undefined;
        const bytes = Buffer.allocUnsafe(Number(blob.size_bytes));
        let offset = 0;
        let seq = 0;
        while (offset < bytes.length) {
          const chunks = await trx
            .selectFrom('blob_chunks')
            .select(['seq', 'bytes'])
            .where('sha256', '=', sha256)
            .where('seq', '>=', seq)
            .where('seq', '<', seq + CHUNKS_PER_READ)
            .orderBy('seq')
            .execute();
          if (chunks.length === 0)
            throw new Error(`blob ${sha256} is damaged: ${bytes.length - offset} of its ${bytes.length} bytes are missing from chunk ${seq} on`);
          for (const chunk of chunks) {
            if (chunk.seq !== seq || chunk.bytes.length === 0 || offset + chunk.bytes.length > bytes.length) {
              throw new Error(
                `blob ${sha256} is damaged: chunk ${chunk.seq} (${chunk.bytes.length} bytes) where chunk ${seq} should start at byte ${offset} of ${bytes.length}`,
              );
            }
            bytes.set(chunk.bytes, offset);
            offset += chunk.bytes.length;
            seq++;
          }
        }
        return bytes;
      });
  }

  async delete(sha256: string): Promise<void> {
    await this.#deleteUnreferenced(sha256);
  }

  /** Deletes the blob unless a document refers to it (again); true when it was deleted. */
  async #deleteUnreferenced(sha256: string): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      await lockBlob(trx, sha256, 'postgres');
      const result = await trx
        .deleteFrom('blobs')
        .where('sha256', '=', sha256)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('documents').select('id').where('documents.sha256', '=', sha256))))
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    });
  }

  async recover(): Promise<{ temporaryFiles: number; orphanBlobs: number }> {
    const temporaryFiles = await this.#staging.removeTemporaryFiles();
    // Blobs and their documents commit together, so only a crash between a
    // document's deletion and its blob's leaves an orphan. Each is deleted under
    // the blob's lock and checked again there, as delete() does: another instance
    // may be storing a document with the same bytes right now.
    const orphans = await this.#db
      .selectFrom('blobs')
      .select('sha256')
      .where(({ not, exists, selectFrom }) => not(exists(selectFrom('documents').select('id').whereRef('documents.sha256', '=', 'blobs.sha256'))))
      .execute();
    let orphanBlobs = 0;
    for (const { sha256 } of orphans) if (await this.#deleteUnreferenced(sha256)) orphanBlobs++;
    return { temporaryFiles, orphanBlobs };
  }
}

/** Reads exactly `buffer.length` bytes at `position`, or fails: the file is shorter than it was. */
async function readFully(file: FileHandle, buffer: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < buffer.length) {
    const { bytesRead } = await file.read(buffer, done, buffer.length - done, position + done);
    if (bytesRead === 0) throw new Error('a staged blob is shorter than it was');
    done += bytesRead;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
