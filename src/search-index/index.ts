import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/tables.ts';
import { loadInProcess } from './loader.ts';
import { SearchIndexes, type SearchIndexLog } from './search-indexes.ts';
import { readListedSnapshot } from './snapshots.ts';

/**
 * The in-memory search indexes as the rest of signroom uses them (the facade of this folder):
 * a server's indexes, the sweep of what stopped loaders left, and what an import does for them.
 * How they load, update and keep copies is inside: search-indexes.ts, loader.ts, worker.ts,
 * snapshots.ts, import-copies.ts.
 */
export { SearchIndexes, type LookupQuery } from './search-indexes.ts';
export type { RoomMembers, SearchIndex } from '../domain/search-index.ts';
export { removeOrphanedResults } from './loader.ts';
export { importOptionsFor } from './import-copies.ts';

/** A server's indexes: read whole in loading processes of their own, their copies kept in `config.searchCopiesDir`. */
export function serverSearchIndexes(config: Config, db: Kysely<Database>, log: SearchIndexLog): SearchIndexes {
  return new SearchIndexes(db, config.search, (job) => loadInProcess(config, job), log, {
    snapshotOf: (orgId, version, after) => readListedSnapshot(config.searchCopiesDir, db, orgId, version, after),
  });
}
