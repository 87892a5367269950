/**
 * The app the fidelity and upload-family benches run: buildApp (src/app.ts) on the default
 * configuration, SQLite in a fresh data directory (so the default render budget), with
 * organization "bench", its room "room" and the credential bench / bench-password.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { migrateToLatest, openDatabase } from '../src/db/database.ts';
import { importDirectory } from '../src/directory/bulk-import.ts';
import { validateDirectoryFile } from '../src/domain/directory-file.ts';
import { importOptionsFor } from '../src/search-index/index.ts';

export const BENCH_AUTHORIZATION = `Basic ${Buffer.from('bench:bench-password').toString('base64')}`;
/** The room's documents, as a path. */
export const BENCH_DOCUMENTS = '/admin/api/v3/organizations/bench/rooms/room/documents';

export interface BenchApp {
  app: FastifyInstance;
  /** http://127.0.0.1:PORT when listening. */
  base: string | undefined;
  /** A directory of its own for the bench's files, removed with the data on close. */
  work: string;
  close(): Promise<void>;
}

/** Builds the app, ready; listening on 127.0.0.1:`port` when given (as `bin/signroom serve` does), else for `app.inject`. */
export async function startBenchApp(options: { port?: number } = {}): Promise<BenchApp> {
  const work = mkdtempSync(path.join(tmpdir(), 'signroom-bench-app-'));
  const config = loadConfig({
    SIGNROOM_DATA_DIR: path.join(work, 'data'),
    SIGNROOM_LOG_LEVEL: 'silent',
    ...(options.port !== undefined ? { PORT: String(options.port) } : {}),
  });
  const setup = openDatabase(config);
  await migrateToLatest(setup);
  const directory = validateDirectoryFile({
    organizations: [{ id: 'bench', name: 'bench', users: [], rooms: [{ id: 'room', name: 'room', members: [] }] }],
    credentials: [{ username: 'bench', password: 'bench-password', organizations: ['bench'] }],
  });
  await importDirectory(setup.db, directory.file, [], importOptionsFor(config));
  await setup.close();
  const app = await buildApp(config);
  const close = async () => {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  };
  try {
    if (options.port === undefined) await app.ready();
    else await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await close();
    throw error;
  }
  return { app, base: options.port === undefined ? undefined : `http://${config.host}:${config.port}`, work, close };
}
