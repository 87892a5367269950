import { closeSync, openSync, readSync, realpathSync } from 'node:fs';
import type { DatabaseSync, StatementSync } from 'node:sqlite';

/*
 * Telling, on every request, whether any connection of any process (the CLI's
 * import, another server) has committed to the SQLite database since the last
 * look: the caches keep what they hold only while nothing has.
 *
 * `PRAGMA data_version` tells, but it opens a read transaction to do so: two
 * fcntl locks and an fstat, a large share of the server's busy time under
 * load. The same news sits in the WAL-index header,
 * in the `-shm` file every connection to a WAL database shares (mapped into
 * memory; a read of the file sees what the mapping holds): one pread of 96 bytes,
 * no lock. Its layout is part of SQLite's file format, fixed because
 * connections of different SQLite versions share it: https://sqlite.org/walformat.html
 * (section 2.2.1, "The WAL-Index Header").
 *
 * The header is 48 bytes, stored twice. A writer commits by appending frames
 * to the WAL, then rewrites the header (iChange, a counter of write
 * transactions; mxFrame, the last valid frame; the salts, new whenever the WAL
 * starts over): first the second copy, then the first, both before the commit
 * returns. A read that finds the two copies equal and initialized therefore
 * reflects every commit acknowledged before it began. If they differ (a writer
 * is in the middle of it) or the file cannot be read, the pragma answers instead.
 *
 * The file is opened once, while this process's own connection has it mapped
 * (SQLite maps it on the first read of a WAL database and keeps it until the
 * connection closes; while any connection holds it, no other deletes it): it is
 * then the very file every committing connection writes its header to.
 */

/**
 * The -shm files this process has open, by path, with how many counters read each. Closing any
 * descriptor of a file drops every POSIX lock this process holds on it, SQLite's own included (a
 * connection's hold on the WAL index, which tells another process opening the database that it is
 * not the first, and must not reset the index under this one's mapping): so a second connection in
 * one process (a test's import beside the server) shares the descriptor, which is closed only
 * when the last counter is.
 */
const openShmFiles = new Map<string, { fd: number; users: number }>();

function openShared(file: string): number {
  const open = openShmFiles.get(file);
  if (open !== undefined) {
    open.users += 1;
    return open.fd;
  }
  const fd = openSync(file, 'r');
  openShmFiles.set(file, { fd, users: 1 });
  return fd;
}

function closeShared(file: string): void {
  const open = openShmFiles.get(file);
  if (open === undefined) return;
  open.users -= 1;
  if (open.users > 0) return;
  openShmFiles.delete(file);
  closeSync(open.fd);
}

/** Bytes of one copy of the WAL-index header, and of the two read. */
const HEADER = 48;
/** iVersion, the first field: the WAL-index format this layout describes. */
const WAL_INDEX_VERSION = 3007000;
/** isInit: nonzero once the header is valid. */
const IS_INIT_OFFSET = 12;

/**
 * What the header says, when its two copies agree and it is valid (the 48 bytes
 * as a string: any commit changes them); undefined otherwise.
 */
export function walIndexState(bytes: Uint8Array): string | undefined {
  if (bytes.byteLength < 2 * HEADER) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, 2 * HEADER);
  // Written in the machine's own byte order; readers on this machine share it.
  const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  if (view.getUint32(0, littleEndian) !== WAL_INDEX_VERSION || bytes[IS_INIT_OFFSET] === 0) return undefined;
  for (let at = 0; at < HEADER; at++) if (bytes[at] !== bytes[HEADER + at]) return undefined;
  return Buffer.from(bytes.buffer, bytes.byteOffset, HEADER).toString('latin1');
}

/**
 * A number that changes whenever any connection commits to the database, this
 * process's own included (unlike the pragma), and now and then when none did (a
 * WAL restarted, a fall back to the pragma). A change empties the caches that
 * depend on it: a spurious one costs them their next reads, never an answer.
 */
export class SqliteCommitCounter {
  readonly #dataVersion: StatementSync;
  readonly #bytes = Buffer.alloc(2 * HEADER);
  #fd: number | undefined;
  #shmFile: string | undefined;
  #last = '';
  #count = 0;

  /** `native` must be open, in WAL mode, and have read once (so its -shm file is mapped). */
  constructor(native: DatabaseSync, databaseFile: string) {
    this.#dataVersion = native.prepare('PRAGMA data_version');
    this.#dataVersion.get();
    try {
      // SQLite names it after the database file's real path (it follows symbolic links).
      this.#shmFile = `${realpathSync(databaseFile)}-shm`;
      this.#fd = openShared(this.#shmFile);
    } catch {
      // No -shm file (not in WAL mode, or an in-memory WAL index): the pragma answers every time.
    }
  }

  /** Reads the header (or, failing that, the pragma); the count moves on when what it says differs from the last reading. */
  read(): number {
    const state = this.#header() ?? `v${(this.#dataVersion.get() as { data_version: number }).data_version}`;
    if (state !== this.#last) {
      this.#last = state;
      this.#count += 1;
    }
    return this.#count;
  }

  /** Call after the connection is closed (see openSqlite in database.ts: closing drops the process's locks on the file). */
  close(): void {
    if (this.#shmFile !== undefined && this.#fd !== undefined) closeShared(this.#shmFile);
    this.#fd = undefined;
  }

  #header(): string | undefined {
    if (this.#fd === undefined) return undefined;
    try {
      if (readSync(this.#fd, this.#bytes, 0, this.#bytes.byteLength, 0) !== this.#bytes.byteLength) return undefined;
    } catch {
      return undefined;
    }
    return walIndexState(this.#bytes);
  }
}
