import type { Config } from '../config.ts';
import { preferIndexWalks } from '../db/dialect-sql.ts';
import { findOrganizationSize, readChangedUsers } from '../repositories/search-index-repository.ts';
import type { ImportOptions } from './directory-import.ts';
import { readIndexParts } from './search-index-loader.ts';
import { MAX_LAID_OVER, maxIndexedUsers } from './search-indexes.ts';
import { writeSnapshot } from './search-index-snapshots.ts';

/**
 * What an import does beside writing the directory, in the CLI as in the tests: it leaves a copy
 * of the search index (search-index-snapshots.ts) of each organization of a size that gets one
 * of which it changed more users than a server lays over the index it holds (MAX_LAID_OVER).
 * Without the copy, a server holding the index would read it whole from the database again (6–10 s
 * at a million users, lookups with terms answered by the database meanwhile); with it, the server
 * takes the index in about a second.
 *
 * The copy is read in the import's own transaction, once everything is written and only the
 * commit is left, so it is on disk before any server sees the new version (a server holding the
 * index looks for changes every 50 ms). It names the version with the import's stamp, which the
 * database lists only once the import commits: a copy of an import that then fails is never used.
 *
 * Not for a first import of an organization: no server holds an index of it, and its first
 * import is the longest (reading the index would add about 5.5 s to a million users' 35–45 s, on
 * PostgreSQL 12 s in the transaction). A server reads that index whole once, and keeps a copy.
 */
export function importOptionsFor(config: Pick<Config, 'searchCopiesDir' | 'search'>): Pick<ImportOptions, 'beforeCommit'> {
  if (config.search.memoryBytes === 0) return {};
  const directory = config.searchCopiesDir;
  const range = { minUsers: config.search.minUsers, maxUsers: maxIndexedUsers(config.search) };
  return {
    beforeCommit: async (trx, imported, stamp) => {
      for (const organization of imported) {
        if (organization.firstUsers || organization.usersInFile <= MAX_LAID_OVER) continue;
        const size = await findOrganizationSize(trx, organization.id);
        if (size === undefined || size.users < range.minUsers || size.users > range.maxUsers) continue;
        if ((await readChangedUsers(trx, organization.id, size.version - 1, MAX_LAID_OVER + 1)).length <= MAX_LAID_OVER) continue;
        await preferIndexWalks(trx);
        const parts = await readIndexParts(trx, organization.id, size);
        // A copy that cannot be written (a read-only directory) costs only a server's speed.
        await writeSnapshot(directory, organization.id, { version: size.version, stamp }, parts).catch(() => undefined);
      }
    },
  };
}
