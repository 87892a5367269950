import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { endianness } from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import { arraysOfParts, emptyParts, partsBytes, type SearchIndexParts } from '../domain/search-index.ts';
import { findDirectoryStamp } from '../repositories/search-index-repository.ts';

/**
 * Copies of large organizations' search indexes on disk, one file each, so a
 * restarted server takes its index from the file instead of reading a million
 * users from the database again (seconds during which lookups with terms are
 * answered by the database). A copy holds the directory version and the stamp
 * it was read at, and is used only if the database lists that pair (see the
 * directory-states migration: no other database, nor this one restored and
 * imported into again, has it); what changed since is then laid over it like
 * over any index held. A copy any byte of which fails its checksum is not used.
 *
 * File: "SRIX", format (u32), header length (u32), the header (JSON), the
 * index's arrays as they lie in memory, then a CRC-32 of all that came before.
 */

const MAGIC = Buffer.from('SRIX');
/**
 * Bumped by any change to what a copy holds or how: the parts' arrays, or what the index makes of
 * the keys (folding, their order: the users' key columns sort bytewise, "C", so no collation of
 * the system moves them). A copy of another format is passed over.
 */
const FORMAT = 1;
const PREFIX_BYTES = 12;
/** A temporary file older than this was left by a writer that was stopped. */
const ABANDONED_MS = 10 * 60_000;

/** The state of an organization's directory an index was read at: its version, and the stamp the database lists it with. */
export interface DirectoryState {
  version: number;
  stamp: string;
}

interface Header {
  orgId: string;
  version: number;
  stamp: string;
  users: number;
  keyBytes: number;
  endianness: string;
}

/** The file holding the organization's copy (an id may be "." or "..": never a name alone). */
function fileOf(directory: string, orgId: string): string {
  return path.join(directory, `org-${orgId}.index`);
}

const bytesOf = (array: ArrayBufferView) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength);

/**
 * Keeps the parts as the organization's copy, read at `state`. Written to a
 * temporary file and renamed, so a reader sees the old copy or the new one whole.
 */
export async function writeSnapshot(directory: string, orgId: string, state: DirectoryState, parts: SearchIndexParts): Promise<void> {
  await mkdir(directory, { recursive: true });
  const file = fileOf(directory, orgId);
  await removeAbandoned(directory, path.basename(file));
  const header: Header = {
    orgId,
    version: state.version,
    stamp: state.stamp,
    users: parts.seqs.length,
    keyBytes: parts.keys.byteLength,
    endianness: endianness(),
  };
  const headerBytes = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.alloc(PREFIX_BYTES);
  MAGIC.copy(prefix, 0);
  prefix.writeUInt32LE(FORMAT, 4);
  prefix.writeUInt32LE(headerBytes.byteLength, 8);
  const temporary = `${file}.${randomUUID()}.tmp`;
  const handle = await open(temporary, 'w', 0o600);
  try {
    let checksum = 0;
    for (const bytes of [prefix, headerBytes, ...arraysOfParts(parts).map(bytesOf)]) {
      if ((await handle.write(bytes)).bytesWritten !== bytes.byteLength) throw new Error(`${temporary}: short write`);
      checksum = crc32(bytes, checksum);
    }
    const trailer = Buffer.alloc(4);
    trailer.writeUInt32LE(checksum >>> 0, 0);
    await handle.write(trailer);
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  await rename(temporary, file);
}

/**
 * The organization's copy, if there is one of its directory at `version` or
 * an earlier version (but later than `after`) that the database lists with the copy's stamp.
 */
export function readListedSnapshot(directory: string, db: Kysely<Database>, orgId: string, version: number, after = -1): Promise<SearchIndexParts | undefined> {
  return readSnapshot(directory, orgId, async (state) => state.version <= version && state.version > after && (await isListed(db, orgId, state)));
}

/** Whether the database lists the organization's directory state: that version, made by the import with that stamp. */
export async function isListed(db: Kysely<Database>, orgId: string, state: DirectoryState): Promise<boolean> {
  return (await findDirectoryStamp(db, orgId, state.version)) === state.stamp;
}

/**
 * The organization's copy, if there is one whose state `isListed` confirms
 * and it is whole (its size and checksum hold); otherwise undefined, whatever
 * the file holds. Its parts are of the copy's version.
 */
export async function readSnapshot(
  directory: string,
  orgId: string,
  isListed: (state: DirectoryState) => Promise<boolean>,
): Promise<SearchIndexParts | undefined> {
  return withCopy(directory, orgId, async (handle, { prefix, headerBytes, header }) => {
    if (!(await isListed({ version: header.version, stamp: header.stamp }))) return undefined;
    const parts = emptyParts(header.version, header.users, header.keyBytes);
    const arrays = arraysOfParts(parts).map(bytesOf);
    let checksum = crc32(headerBytes, crc32(prefix));
    let at = PREFIX_BYTES + headerBytes.byteLength;
    for (const bytes of arrays) {
      if (!(await readFully(handle, bytes, at))) return undefined;
      checksum = crc32(bytes, checksum);
      at += bytes.byteLength;
    }
    const trailer = Buffer.alloc(4);
    if ((await handle.read(trailer, 0, 4, at)).bytesRead !== 4 || trailer.readUInt32LE(0) !== checksum >>> 0) return undefined;
    return parts;
  });
}

/** The state the organization's copy claims to be of (its header alone, unchecked beyond it), if there is a copy. */
export function snapshotState(directory: string, orgId: string): Promise<DirectoryState | undefined> {
  return withCopy(directory, orgId, async (_handle, { header }) => ({ version: header.version, stamp: header.stamp }));
}

interface CopyStart {
  prefix: Buffer;
  headerBytes: Buffer;
  header: Header;
}

/**
 * Opens the organization's copy and reads its prefix and header, which must be of this format,
 * organization and byte order, and claim the file's size; then `use` reads on. Undefined if any
 * of that fails, or `use` throws.
 */
async function withCopy<T>(directory: string, orgId: string, use: (handle: FileHandle, start: CopyStart) => Promise<T | undefined>): Promise<T | undefined> {
  let handle: FileHandle;
  try {
    // Non-blocking, so a FIFO put there is passed over below instead of waited on for good.
    handle = await open(fileOf(directory, orgId), constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return undefined;
    const prefix = Buffer.alloc(PREFIX_BYTES);
    if ((await handle.read(prefix, 0, PREFIX_BYTES, 0)).bytesRead !== PREFIX_BYTES) return undefined;
    if (!prefix.subarray(0, 4).equals(MAGIC) || prefix.readUInt32LE(4) !== FORMAT) return undefined;
    const headerLength = prefix.readUInt32LE(8);
    if (headerLength > 4096) return undefined;
    const headerBytes = Buffer.alloc(headerLength);
    if ((await handle.read(headerBytes, 0, headerLength, PREFIX_BYTES)).bytesRead !== headerLength) return undefined;
    const header = parseHeader(headerBytes);
    if (header === undefined || header.orgId !== orgId || header.endianness !== endianness()) return undefined;
    // Checked before anything is allocated: the header could claim any size.
    if (info.size !== PREFIX_BYTES + headerLength + partsBytes(header.users, header.keyBytes) + 4) return undefined;
    return await use(handle, { prefix, headerBytes, header });
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/** Fills `bytes` from the file at `at` (a read may give fewer bytes than asked); false at the end of the file. */
async function readFully(handle: FileHandle, bytes: Uint8Array, at: number): Promise<boolean> {
  for (let done = 0; done < bytes.byteLength;) {
    const { bytesRead } = await handle.read(bytes, done, bytes.byteLength - done, at + done);
    if (bytesRead === 0) return false;
    done += bytesRead;
  }
  return true;
}

function parseHeader(bytes: Buffer): Header | undefined {
  try {
    const header = JSON.parse(bytes.toString('utf8')) as Partial<Header>;
    const { orgId, version, stamp, users, keyBytes, endianness: order } = header;
    if (typeof orgId !== 'string' || typeof stamp !== 'string' || typeof order !== 'string') return undefined;
    if (![version, users, keyBytes].every((value) => Number.isSafeInteger(value) && value! >= 0)) return undefined;
    return { orgId, version: version!, stamp, users: users!, keyBytes: keyBytes!, endianness: order };
  } catch {
    return undefined;
  }
}

/** Removes temporary copies of `name` left by writers that were stopped midway. */
async function removeAbandoned(directory: string, name: string): Promise<void> {
  for (const entry of await readdir(directory).catch(() => [])) {
    if (!entry.startsWith(`${name}.`) || !entry.endsWith('.tmp')) continue;
    const file = path.join(directory, entry);
    const modified = await stat(file).then(
      (info) => info.mtimeMs,
      () => undefined,
    );
    if (modified !== undefined && Date.now() - modified > ABANDONED_MS) await rm(file, { force: true });
  }
}
