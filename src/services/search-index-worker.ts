/**
 * Worker thread: reads one load job (src/services/search-index-loader.ts) on a
 * connection of its own, posts the result with its arrays transferred, and ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { readLoadJob, type LoadJob, type LoadResult } from './search-index-loader.ts';

const { config, job } = workerData as { config: Config; job: LoadJob };
// One connection, a small page cache, no change notices: this connection only reads, once.
const database = openDatabase({
  ...config,
  databasePoolSize: 1,
  databaseChangeNotices: false,
  sqliteMemory: { mmapBytes: 0, cacheBytes: 8 * 1024 * 1024 },
});
try {
  const result = await readLoadJob(database.db, job);
  parentPort!.postMessage(result, transferred(result));
} finally {
  await database.close();
}

function transferred(result: LoadResult): ArrayBuffer[] {
  if (result.kind === 'members') return [result.seqs.buffer as ArrayBuffer];
  if (result.kind !== 'index') return [];
  const { keys, starts, kinds, seqs, orders } = result.parts;
  const arrays = [keys, starts, kinds, seqs, orders.lastname, orders.firstname, orders.email];
  // Each array must own its buffer whole to be handed over (Buffer.concat's does; a pooled one would not).
  return arrays.every((array) => array.byteOffset === 0 && array.byteLength === array.buffer.byteLength) ? arrays.map((array) => array.buffer as ArrayBuffer) : [];
}
