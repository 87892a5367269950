import type { Kysely, Transaction } from 'kysely';
import type { Config } from '../config.ts';
import { preferIndexWalks } from '../db/dialect-sql.ts';
import { dialectOf } from '../db/dialect.ts';
import type { Database } from '../db/tables.ts';
import { findOrganizationSize, readChangedUsers } from '../repositories/search-index-repository.ts';
import type { ImportedOrganization, ImportOptions } from './directory-import.ts';
import { readIndexParts, readLoadJob } from './search-index-loader.ts';
import { MAX_LAID_OVER, maxIndexedUsers } from './search-indexes.ts';
import { writeSnapshot } from './search-index-snapshots.ts';

/**
 * What an import does beside writing the directory, in the CLI as in the tests: it leaves a copy
 * of the search index (search-index-snapshots.ts) of each organization of a size that gets one
 * which it changed more than a server lays over the index it holds (MAX_LAID_OVER users). Without
 * the copy, a server reads that index whole from the database (6–10 s at a million users, lookups
 * with terms answered by the database meanwhile); with it, in about a second.
 *
 * The copy is read in the import's own transaction, once everything is written and only the
 * commit is left, so it is on disk before any server sees the new version (a server holding the
 * index takes in a change within 50 ms). It names the version with the import's stamp, which the
 * database lists only once the import commits: a copy of an import that then fails is never used.
 * One exception: a first import of an organization on PostgreSQL is read after the commit, once
 * its rows are marked visible (markImportVisible): in the transaction, every index entry sent
 * PostgreSQL to its row, and the sort orders of a million users took 12 s instead of 3 s. No server
 * holds an index of an organization that had no users, so none is waiting for that copy. (On
 * SQLite, reading after the commit was the slower: 7.5 s against 5.4 s, through a large WAL.)
 *
 * At a million users, the copy makes the import about 5.5 s longer. A copy that cannot be written
 * costs only a server's speed.
 */
export function importOptionsFor(config: Pick<Config, 'searchCopiesDir' | 'search'>): Pick<ImportOptions, 'beforeCommit' | 'afterCommit'> {
  if (config.search.memoryBytes === 0) return {};
  const directory = config.searchCopiesDir;
  const range = { minUsers: config.search.minUsers, maxUsers: maxIndexedUsers(config.search) };
  const large = (organization: ImportedOrganization) => organization.usersInFile > MAX_LAID_OVER;
  const readAfterCommit = (organization: ImportedOrganization, db: Kysely<Database>) => organization.firstUsers && dialectOf(db) === 'postgres';
  return {
    beforeCommit: async (trx, imported, stamp) => {
      for (const organization of imported) {
        if (!large(organization) || readAfterCommit(organization, trx)) continue;
        const size = await findOrganizationSize(trx, organization.id);
        if (size === undefined || size.users < range.minUsers || size.users > range.maxUsers) continue;
        if (!organization.firstUsers && (await readChangedUsers(trx, organization.id, size.version - 1, MAX_LAID_OVER + 1)).length <= MAX_LAID_OVER) continue;
        await preferIndexWalks(trx);
        const parts = await readIndexParts(trx, organization.id, size);
        await writeSnapshot(directory, organization.id, { version: size.version, stamp }, parts).catch(() => undefined);
      }
    },
    afterCommit: async (db, imported) => {
      for (const organization of imported) {
        if (!large(organization) || !readAfterCommit(organization, db)) continue;
        // Committed already: a database gone meanwhile costs only the copy.
        await readLoadJob(db, { kind: 'organization', orgId: organization.id, ...range }, { snapshots: directory }).catch(() => undefined);
      }
    },
  };
}
