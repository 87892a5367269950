import { sql, type Transaction } from 'kysely';
import type { Config } from '../config.ts';
import { preferIndexWalks } from '../db/dialect-sql.ts';
import type { Database } from '../db/tables.ts';
import { findOrganizationSize, readChangedUsers } from '../repositories/search-index-repository.ts';
import type { ImportOptions } from '../directory/bulk-import.ts';
import { readIndexParts } from './loader.ts';
import { IMPORT_COPY_AFTER, maxIndexedUsers } from './search-indexes.ts';
import { writeSnapshot } from './snapshots.ts';

/**
 * What an import does beside writing the directory, in the CLI as in the tests: it leaves a copy
 * of the search index (snapshots.ts) of each organization of a size that gets one
 * of which it changed more users than a server may lay over the index it holds (IMPORT_COPY_AFTER).
 * Without the copy, a server holding the index would read it whole from the database again (lookups
 * with terms answered by the database meanwhile); taking the copy is much quicker.
 *
 * The copy is read in the import's own transaction, once everything is written and only the
 * commit is left, so it is on disk before any server sees the new version (a server holding the
 * index looks for changes every 50 ms). It names the version with the import's stamp, which the
 * database lists only once the import commits: a copy of an import that then fails is never used.
 *
 * Not for a first import of an organization: no server holds an index of it, and its first
 * import is the longest there is, which reading the index would make longer still. A server reads
 * that index whole once, and keeps a copy.
 */
export function importOptionsFor(
  config: Pick<Config, 'searchCopiesDir' | 'search'>,
  warn: (message: string) => void = () => undefined,
): Pick<ImportOptions, 'beforeCommit'> {
  if (config.search.memoryBytes === 0) return {};
  const directory = config.searchCopiesDir;
  const range = { minUsers: config.search.minUsers, maxUsers: maxIndexedUsers(config.search) };
  return {
    beforeCommit: async (trx, imported, stamp) => {
      for (const organization of imported) {
        if (organization.firstUsers || organization.usersInFile <= IMPORT_COPY_AFTER) continue;
        // In a savepoint: the copy is only a server's speed, and a read that fails (on PostgreSQL,
        // any failed statement aborts the transaction) must not cost the import.
        await sql`savepoint search_index_copy`.execute(trx);
        try {
          await writeCopy(trx, organization.id, stamp, directory, range);
          await sql`release savepoint search_index_copy`.execute(trx);
        } catch (error) {
          await sql`rollback to savepoint search_index_copy`.execute(trx);
          await sql`release savepoint search_index_copy`.execute(trx);
          warn(
            `left no copy of the search index of organization "${organization.id}" (${error instanceof Error ? error.message : String(error)}); servers holding it will read it whole`,
          );
        }
      }
    },
  };
}

/** Writes the organization's copy if it is of a size that gets an index and more of its users changed than a server lays over. */
async function writeCopy(
  trx: Transaction<Database>,
  orgId: string,
  stamp: string,
  directory: string,
  range: { minUsers: number; maxUsers: number },
): Promise<void> {
  const size = await findOrganizationSize(trx, orgId);
  if (size === undefined || size.users < range.minUsers || size.users > range.maxUsers) return;
  if ((await readChangedUsers(trx, orgId, size.version - 1, IMPORT_COPY_AFTER + 1)).length <= IMPORT_COPY_AFTER) return;
  await preferIndexWalks(trx);
  const parts = await readIndexParts(trx, orgId, size);
  await writeSnapshot(directory, orgId, { version: size.version, stamp }, parts);
}
