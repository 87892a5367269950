import { createHash, randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';

/** Bytes written durably but not yet part of the store: commit or discard them. */
export interface StagedBlob {
  readonly sha256: string;
  /** A file holding the bytes, readable until the blob is committed or discarded. */
  readonly path: string;
}

/** Where document bytes live, addressed by their SHA-256. A later issue may add object storage. */
export interface BlobStore {
  /** Writes the bytes to a temporary file and fsyncs it; nothing is stored until commit. */
  stage(bytes: Buffer): Promise<StagedBlob>;
  /** Moves staged bytes into the store (durably); identical bytes are stored once. */
  commit(staged: StagedBlob): Promise<void>;
  /** Forgets staged bytes. */
  discard(staged: StagedBlob): Promise<void>;
  /** The bytes, or undefined when no blob has that hash. */
  get(sha256: string): Promise<Buffer | undefined>;
  delete(sha256: string): Promise<void>;
  /** Every stored hash. */
  list(): Promise<string[]>;
  /** Removes what interrupted writes left behind; returns how many files. */
  removeTemporaryFiles(): Promise<number>;
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

  constructor(dir: string) {
    this.#dir = dir;
    this.#tmp = path.join(dir, 'tmp');
  }

  async init(): Promise<void> {
    await mkdir(this.#tmp, { recursive: true });
  }

  #path(sha256: string): string {
    if (!SHA256_HEX.test(sha256)) throw new Error('not a SHA-256 hex digest');
    return path.join(this.#dir, sha256.slice(0, 2), sha256);
  }

  async stage(bytes: Buffer): Promise<StagedBlob> {
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const temporary = path.join(this.#tmp, `${randomUUID()}.part`);
    const file = await open(temporary, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o640);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    return { sha256, path: temporary };
  }

  async commit(staged: StagedBlob): Promise<void> {
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

  async removeTemporaryFiles(): Promise<number> {
    const names = await readdir(this.#tmp);
    await Promise.all(names.map((name) => rm(path.join(this.#tmp, name), { force: true })));
    return names.length;
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
