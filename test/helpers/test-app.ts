import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { migrateToLatest, openDatabase } from '../../src/db/database.ts';
import { validateDirectoryFile } from '../../src/domain/directory-file.ts';
import { importDirectory } from '../../src/services/directory-import.ts';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  dataDir: string;
  /** Imports a directory file (contract section 6) through the real import service. */
  importDirectory(file: unknown): Promise<void>;
  close(): Promise<void>;
}

/** A fresh data directory under the system temp dir. */
export function freshDataDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'signroom-test-'));
}

/**
 * Builds the real app with buildApp on a fresh SQLite file, exactly as the
 * server does; only the data directory, log level and given variables differ.
 */
export async function startTestApp(env: Record<string, string> = {}, now?: () => number): Promise<TestApp> {
  const dataDir = freshDataDir();
  const config = loadConfig({ SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'silent', ...env });
  const app = await buildApp(config, now !== undefined ? { now } : {});
  await app.ready();
  return {
    app,
    config,
    dataDir,
    async importDirectory(file) {
      const result = validateDirectoryFile(file);
      if (result.problems.length > 0) throw new Error(`invalid test directory: ${JSON.stringify(result.problems)}`);
      const handle = openDatabase(config);
      try {
        await migrateToLatest(handle.db);
        await importDirectory(handle.db, result.file);
      } finally {
        await handle.close();
      }
    },
    async close() {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The Authorization header value for Basic credentials (UTF-8). */
export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

export const LOOKUP = (orgId: string, roomId: string) =>
  `/admin/api/v3/organizations/${encodeURIComponent(orgId)}/rooms/${encodeURIComponent(roomId)}/signatories/lookup`;
