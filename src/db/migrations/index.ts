import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { DialectName } from '../dialect.ts';
import * as directory from './2026-11-22T0000-directory.ts';
import * as documents from './2026-11-22T0100-documents.ts';
import * as sharedState from './2026-11-22T0200-shared-state.ts';
import * as blobChunks from './2026-11-23T0300-blob-chunks.ts';
import * as userTallies from './2026-11-23T0400-user-tallies.ts';
import * as shortTermScan from './2026-11-23T0500-short-term-scan.ts';
import * as changeNotices from './2026-11-23T0600-change-notices.ts';
import * as searchIndexWithoutPositions from './2026-11-23T0700-search-index-without-positions.ts';
import * as sortIndexesCoverSeq from './2026-11-23T0800-sort-indexes-cover-seq.ts';
import * as changedIn from './2026-11-23T0900-changed-in.ts';
import * as directoryStates from './2026-11-24T0000-directory-states.ts';
import * as directoryWrites from './2026-11-25T0000-directory-writes.ts';
import * as apiTokens from './2026-11-25T0100-api-tokens.ts';
import * as scimLookups from './2026-11-25T0200-scim-lookups.ts';
import * as loginFailuresPerClient from './2026-11-25T0300-login-failures-per-client.ts';
import * as changeNoticesNameTheirTable from './2026-11-27T0000-change-notices-name-their-table.ts';
import * as roomMemberEdits from './2026-11-27T0100-room-member-edits.ts';

/** A migration that may differ by database (search index, column types). */
interface DialectMigration {
  up(db: Kysely<any>, dialect: DialectName): Promise<void>;
  down(db: Kysely<any>, dialect: DialectName): Promise<void>;
}

const ALL: Record<string, DialectMigration> = {
  '2026-11-22T0000-directory': directory,
  '2026-11-22T0100-documents': documents,
  '2026-11-22T0200-shared-state': sharedState,
  '2026-11-23T0300-blob-chunks': blobChunks,
  '2026-11-23T0400-user-tallies': userTallies,
  '2026-11-23T0500-short-term-scan': shortTermScan,
  '2026-11-23T0600-change-notices': changeNotices,
  '2026-11-23T0700-search-index-without-positions': searchIndexWithoutPositions,
  '2026-11-23T0800-sort-indexes-cover-seq': sortIndexesCoverSeq,
  '2026-11-23T0900-changed-in': changedIn,
  '2026-11-24T0000-directory-states': directoryStates,
  '2026-11-25T0000-directory-writes': directoryWrites,
  '2026-11-25T0100-api-tokens': apiTokens,
  '2026-11-25T0200-scim-lookups': scimLookups,
  '2026-11-25T0300-login-failures-per-client': loginFailuresPerClient,
  '2026-11-27T0000-change-notices-name-their-table': changeNoticesNameTheirTable,
  '2026-11-27T0100-room-member-edits': roomMemberEdits,
};

/** All migrations by name, in the order they run, for one database. Add new ones at the end. */
export function migrationsFor(dialect: DialectName): Record<string, Migration> {
  return Object.fromEntries(
    Object.entries(ALL).map(([name, migration]) => [
      name,
      { up: (db: Kysely<any>) => migration.up(db, dialect), down: (db: Kysely<any>) => migration.down(db, dialect) },
    ]),
  );
}
