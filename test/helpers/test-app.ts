import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { after, before } from 'node:test';
import { sql, type RawBuilder } from 'kysely';
import { freshDatabase, TEST_DIALECT } from './databases.ts';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { migrateToLatest, openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { newToken, tokenHash } from '../../src/domain/api-token.ts';
import { validateDirectoryFile } from '../../src/domain/directory-file.ts';
import { importDirectory } from '../../src/directory/bulk-import.ts';
import { importOptionsFor } from '../../src/search-index/import-copies.ts';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  dataDir: string;
  /** Imports a directory file (contract section 6) through the real import service. */
  importDirectory(file: unknown): Promise<void>;
  /** The SHA-256 of every stored blob (files on SQLite, the blobs table on PostgreSQL, whose chunks hang off it). */
  storedBlobs(): Promise<string[]>;
  /** Stores a blob no document refers to, as a crash between a delete and its blob's removal would leave. */
  plantOrphanBlob(sha256: string): Promise<void>;
  /** Runs SQL on the app's database from a separate connection, as an operator would. */
  sql<R>(query: RawBuilder<R>): Promise<R[]>;
  close(): Promise<void>;
}

/**
 * For the suite it is called in: a test app with `directory` imported, and a database handle of
 * the suite's own (as the services get one: for the writer and the repositories without HTTP),
 * opened before the suite's tests and closed after them.
 */
export function appWithHandle(directory: unknown): { readonly t: TestApp; readonly handle: DatabaseHandle } {
  let t: TestApp | undefined;
  let handle: DatabaseHandle | undefined;
  before(async () => {
    t = await startTestApp();
    await t.importDirectory(directory);
    handle = openDatabase(t.config);
  });
  after(async () => {
    await handle?.close();
    await t?.close();
  });
  return {
    get t() {
      return t!;
    },
    get handle() {
      return handle!;
    },
  };
}

/** A fresh data directory under the system temp dir. */
export function freshDataDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'signroom-test-'));
}

/**
 * Builds the real app with buildApp on a fresh database of the run's dialect
 * (a SQLite file, or a new PostgreSQL database), exactly as the server does;
 * only the data directory, database, log level and given variables differ.
 */
export async function startTestApp(env: Record<string, string> = {}, now?: () => number, logStream?: NodeJS.WritableStream): Promise<TestApp> {
  const dataDir = freshDataDir();
  const database = await freshDatabase();
  const config = loadConfig({ SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'silent', ...database.env, ...env });
  const app = await buildApp(config, { ...(now !== undefined ? { now } : {}), ...(logStream !== undefined ? { logStream } : {}) });
  await app.ready();
  const testApp: TestApp = {
    app,
    config,
    dataDir,
    async importDirectory(file) {
      const result = validateDirectoryFile(file);
      if (result.problems.length > 0) throw new Error(`invalid test directory: ${JSON.stringify(result.problems)}`);
      const handle = openDatabase(config);
      try {
        await migrateToLatest(handle);
        await importDirectory(handle.db, result.file, [], importOptionsFor(config));
      } finally {
        await handle.close();
      }
    },
    async storedBlobs() {
      if (TEST_DIALECT === 'postgres') return (await testApp.sql<{ sha256: string }>(sql`SELECT sha256 FROM blobs`)).map((row) => row.sha256).sort();
      const blobs = path.join(dataDir, 'blobs');
      return readdirSync(blobs)
        .filter((shard) => /^[0-9a-f]{2}$/.test(shard))
        .flatMap((shard) => readdirSync(path.join(blobs, shard)))
        .sort();
    },
    async plantOrphanBlob(sha256) {
      if (TEST_DIALECT === 'postgres') {
        // Three chunks, as a blob of a few pages of a document would be stored.
        await testApp.sql(sql`
          WITH blob AS (INSERT INTO blobs (sha256, size_bytes) VALUES (${sha256}, 3 * 65536) RETURNING sha256)
          INSERT INTO blob_chunks (sha256, seq, bytes) SELECT blob.sha256, seq, ${Buffer.alloc(65536, 'left by a crash')}::bytea FROM blob, generate_series(0, 2) AS seq`);
        return;
      }
      mkdirSync(path.join(dataDir, 'blobs', sha256.slice(0, 2)), { recursive: true });
      writeFileSync(path.join(dataDir, 'blobs', sha256.slice(0, 2), sha256), 'left by a crash');
    },
    async sql(query) {
      const handle = openDatabase(config);
      try {
        return (await query.execute(handle.db)).rows;
      } finally {
        await handle.close();
      }
    },
    async close() {
      await app.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return testApp;
}

/** The Authorization header value for Basic credentials (UTF-8). */
export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/** An API token of the organization, stored as `bin/signroom token create` stores one (only its hash): the secret to send, and its id. */
export async function addApiToken(t: TestApp, orgId: string): Promise<{ secret: string; id: string }> {
  const secret = newToken();
  const id = `t${randomBytes(6).toString('hex')}`;
  await t.sql(
    sql`INSERT INTO api_tokens (id, org_id, name, secret_hash, created_at) VALUES (${id}, ${orgId}, 'test', ${tokenHash(secret)}, ${new Date().toISOString()})`,
  );
  return { secret, id };
}

export const LOOKUP = (orgId: string, roomId: string) =>
  `/admin/api/v3/organizations/${encodeURIComponent(orgId)}/rooms/${encodeURIComponent(roomId)}/signatories/lookup`;
