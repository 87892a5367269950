/**
 * A child process: reads one load job (src/search-index/loader.ts)
 * on a connection of its own, writes the result's arrays to the file it is
 * given, sends the rest back, and ends.
 */
import { rmSync } from 'node:fs';
import type { Config } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { readLoadJob, writeResult, type LoadJob } from './loader.ts';

/** The result file, until the reply naming it is sent: the server removes it from then on. */
let unsent: string | undefined;

process.once('message', (message: { config: Config; job: LoadJob; file: string }) => {
  unsent = message.file;
  void load(message.config, message.job, message.file);
});
// The server went away: nothing is left to load for, and nobody will read the file.
process.once('disconnect', () => {
  if (unsent !== undefined) rmSync(unsent, { force: true });
  process.exit(0);
});

async function load(config: Config, job: LoadJob, file: string): Promise<void> {
  // One connection, a small page cache, no change notices: this connection only reads, once.
  const database = openDatabase({
    ...config,
    databasePoolSize: 1,
    databaseChangeNotices: false,
    sqliteMemory: { mmapBytes: 0, cacheBytes: 8 * 1024 * 1024 },
  });
  let reply: object;
  try {
    reply = { result: await writeResult(await readLoadJob(database.db, job, { snapshots: config.searchCopiesDir }), file) };
  } catch (error) {
    reply = { error: error instanceof Error ? error.message : String(error) };
  } finally {
    await database.close().catch(() => undefined);
  }
  process.send!(reply, (error) => {
    if (error === null) unsent = undefined;
    process.disconnect();
  });
}
