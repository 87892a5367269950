import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { hashPassword } from '../auth/password-hash.ts';
import { markImportVisible, refreshPlannerStatistics, serializeImports, withoutUserIndexes } from '../db/dialect-sql.ts';
import {
  insertBatch,
  insertMemberRows,
  listDirectoryVersions,
  prepareUserUpsert,
  upsertOrganizationRows,
  upsertRoomRows,
  type UserRow,
} from '../repositories/directory-write-repository.ts';
import { dialectOf } from '../db/dialect.ts';
import { chunks } from '../db/chunks.ts';
import type { Database, RoomTable } from '../db/tables.ts';
import type { DirectoryFile, ImportProblem, OrganizationImport, RoomImport, UserImport } from '../domain/directory-file.ts';
import { userRow } from './directory-rows.ts';
import { insertAuditEvents } from '../repositories/audit-repository.ts';
import { auditEvent, type Actor } from './audit.ts';
import { setCredential } from './credential-changes.ts';
import { retallyAll, retallyOrganization } from '../repositories/user-tally-repository.ts';

export interface ImportCounts {
  organizations: number;
  users: number;
  rooms: number;
  members: number;
  credentials: number;
}

/** The file conflicts with what the database already holds; nothing was changed. */
export class ImportRejected extends Error {
  readonly problems: ImportProblem[];
  constructor(problems: ImportProblem[]) {
    super(`${problems.length} problem(s) in the import file`);
    this.name = 'ImportRejected';
    this.problems = problems;
  }
}

/** An import writing at least this many users of an organization may rebuild the indexes instead (see isBulkLoad). */
const BULK_LOAD_MIN_USERS = 10_000;

/**
 * Whether to drop the users' secondary indexes for the load and build them
 * afterwards: for many users, at least half as many as are stored already
 * (a first import of a large directory), not for a small change to a large
 * table, which would pay to rebuild indexes over rows it does not touch.
 */
export function isBulkLoad(usersInFile: number, usersStored: number): boolean {
  return usersInFile >= BULK_LOAD_MIN_USERS && usersInFile * 2 >= usersStored;
}

async function hasStoredUsers(trx: Transaction<Database>, orgId: string): Promise<boolean> {
  return (await trx.selectFrom('users').select('id').where('org_id', '=', orgId).limit(1).executeTakeFirst()) !== undefined;
}

async function countAllUsers(trx: Transaction<Database>): Promise<number> {
  const row = await trx
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Rows per multi-row INSERT: well under SQLite's 32,766 bound parameters. */
const BATCH = 500;

/** Groups what an iterable gives into arrays of `size`, reading it only as far as needed. */
function* batches<T>(items: Iterable<T>, size = BATCH): Generator<T[]> {
  let batch: T[] = [];
  for (const item of items) {
    batch.push(item);
    if (batch.length === size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** What one import run knows beyond the file: the problems found so far (none: it writes). */
interface ImportRun {
  trx: Transaction<Database>;
  problems: ImportProblem[];
  counts: ImportCounts;
  /** The users' secondary indexes are dropped around the whole file (a bulk load of many organizations), which is tallied after. */
  indexesDropped: boolean;
  /** Listed with each organization's new directory version (see the directory-states migration). */
  stamp: string;
  /** The organizations written, in file order. */
  imported: ImportedOrganization[];
  /** When the import runs: what it creates or changes is stamped with it. */
  at: string;
}

/** An organization an import wrote: what a step run before the commit (ImportOptions.beforeCommit) is told of it. */
export interface ImportedOrganization {
  id: string;
  /** Users the file gives it: at most that many of its users changed. */
  usersInFile: number;
  /** It had no user stored before: every user of it is new. */
  firstUsers: boolean;
  /** What the file gives it: its users, rooms and their members (as the audit event counts them). */
  counts: Omit<ImportCounts, 'organizations' | 'credentials'>;
}

export interface ImportOptions {
  /** Called before the commit: a file read twice must not have changed in between (throws if it did). */
  assertSourceUnchanged?: () => void;
  /**
   * Run last in the import's transaction, once everything is written and only the commit is left,
   * with the organizations written and the stamp their new versions are listed with.
   */
  beforeCommit?: (trx: Transaction<Database>, imported: readonly ImportedOrganization[], stamp: string) => Promise<void>;
  /** Who imports, as the audit trail names them (default: `cli`). */
  actor?: Actor;
}

/** Once a problem is known the run only checks on, so it can report every problem; the transaction is rolled back. */
const writing = (run: ImportRun) => run.problems.length === 0;

/**
 * Applies a validated directory file in one transaction: upserts by id, replaces
 * room member lists, bumps each organization's directory version. The checks
 * that need the database (emails and members of users imported earlier) run in
 * the same transaction as the users and rooms are read, batch by batch; with
 * any problem (from the file or found here) the run only checks on, reports
 * every problem and rolls everything back.
 */
export async function importDirectory(
  db: Kysely<Database>,
  file: DirectoryFile,
  fileProblems: readonly ImportProblem[] = [],
  options: ImportOptions = {},
): Promise<ImportCounts> {
  if (fileProblems.length > 0 && file.organizations.length === 0) throw new ImportRejected([...fileProblems]);
  const hashed =
    fileProblems.length > 0
      ? []
      : await Promise.all(
          file.credentials.map(async (credential) => ({
            username: credential.username,
            passwordHash: await hashPassword(credential.password),
            scope: credential.organizations,
          })),
        );
  const counts: ImportCounts = { organizations: 0, users: 0, rooms: 0, members: 0, credentials: hashed.length };
  await db.transaction().execute(async (trx) => {
    await serializeImports(trx);
    const run: ImportRun = { trx, problems: [...fileProblems], counts, indexesDropped: false, stamp: randomUUID(), imported: [], at: new Date().toISOString() };
    const importAll = async () => {
      for (const organization of file.organizations) await importOrganization(run, organization);
    };
    // Many organizations that together make a bulk load (each too small to count as one, or each
    // a large share of what came before) drop the indexes once, around all of them. The unique
    // keys stay: upserts, the email check and the room members' check look users up by them.
    const fileUsers = file.organizations.reduce((sum, organization) => sum + organization.userCount, 0);
    const storedUsers = file.organizations.length > 1 && writing(run) ? await countAllUsers(trx) : undefined;
    if (storedUsers !== undefined && isBulkLoad(fileUsers, storedUsers)) {
      run.indexesDropped = true;
      // No user stored yet (a first import): nothing to check against or replace, so the
      // organizations are written many to a statement instead of several statements each, and
      // (on PostgreSQL) the unique and foreign keys of users are checked once, after the load.
      const first = storedUsers === 0;
      await withoutUserIndexes(trx, { withKeys: first }, first ? () => loadFirstOrganizations(run, file.organizations) : importAll);
      if (writing(run)) await retallyAll(trx);
    } else {
      await importAll();
    }
    options.assertSourceUnchanged?.();
    if (!writing(run)) throw new ImportRejected(run.problems);
    await refreshPlannerStatistics(trx);
    const actor = options.actor ?? { actor: 'cli' };
    for (const credential of hashed) await setCredential(trx, credential, actor, run.at);
    // One event per organization the import wrote, each in its own organization's trail.
    await insertAuditEvents(
      trx,
      run.imported.map((organization) =>
        auditEvent(
          organization.id,
          actor,
          run.at,
          'directory.imported',
          { type: 'organization', id: organization.id },
          { importId: run.stamp, ...organization.counts },
        ),
      ),
    );
    await options.beforeCommit?.(trx, run.imported, run.stamp);
  });
  await markImportVisible(db);
  return counts;
}

async function importOrganization(run: ImportRun, organization: OrganizationImport): Promise<void> {
  const { trx } = run;
  const firstUsers = !(await hasStoredUsers(trx, organization.id));
  // The directory version this import makes: what it changes is marked with it (see the changed_in migration).
  const version = writing(run) ? await upsertOrganizationRow(run, organization) : 0;
  run.counts.organizations += 1;
  const imported: ImportedOrganization = { id: organization.id, usersInFile: organization.userCount, firstUsers, counts: { users: 0, rooms: 0, members: 0 } };
  run.imported.push(imported);
  const before = { ...run.counts };

  let bulkLoaded = false;
  // Checking only, a first import's users have nothing to be checked against.
  if (organization.userCount > 0 && (writing(run) || !firstUsers)) {
    // The whole table is counted only for an organization big enough to be a bulk load: counted
    // for each of many small organizations, it made an import quadratic.
    const bulk =
      writing(run) && !run.indexesDropped && organization.userCount >= BULK_LOAD_MIN_USERS && isBulkLoad(organization.userCount, await countAllUsers(trx));
    if (bulk) {
      bulkLoaded = true;
      // The rooms too, so that their members are checked against the users' keys once, when the
      // keys are added again, not row by row.
      await withoutUserIndexes(trx, { withKeys: firstUsers }, async () => {
        await upsertUsers(run, organization, firstUsers, version);
        await upsertRooms(run, organization, firstUsers, version);
      });
    } else {
      await upsertUsers(run, organization, firstUsers, version);
    }
  }
  if (!bulkLoaded) await upsertRooms(run, organization, firstUsers, version);
  if (writing(run) && !run.indexesDropped) await retallyOrganization(trx, organization.id, { mostOfTable: bulkLoaded });
  imported.counts = { users: run.counts.users - before.users, rooms: run.counts.rooms - before.rooms, members: run.counts.members - before.members };
}

/** Upserts the organization's rooms and replaces the member lists the file gives; `firstUsers`: the organization had no user stored. */
async function upsertRooms(run: ImportRun, organization: OrganizationImport, firstUsers: boolean, version: number): Promise<void> {
  for (const room of organization.rooms()) {
    for (const index of await unknownMembers(run.trx, organization, room, firstUsers)) run.problems.push(unknownMember(organization, room, index));
    if (writing(run)) await upsertRoom(run, organization.id, room, version);
    run.counts.rooms += 1;
    run.counts.members += room.members?.length ?? 0;
  }
}

/** Upserts the organization; its directory version after (bumped, unless it is new). */
async function upsertOrganizationRow(run: ImportRun, organization: OrganizationImport): Promise<number> {
  const versions = await upsertOrganizationRows(run.trx, [organization], run.at);
  await listDirectoryVersions(run.trx, versions, run.stamp);
  return versions[0]!.directory_version;
}

/** Organizations per statement of a first load (each one's rooms go with it). */
const FIRST_LOAD_ORGANIZATIONS = 500;

/**
 * The first import of a directory of many organizations: no user is stored in
 * any, so there is no stored email to collide with, no stored member to check
 * or replace (members are only ever stored for stored users), and every user
 * is a plain insert. Organizations and their rooms are upserted many to a
 * statement, users and members inserted in batches of rows from many
 * organizations: per-organization statements cost a round trip each, which
 * made a file of many small organizations slow on PostgreSQL.
 */
async function loadFirstOrganizations(run: ImportRun, organizations: readonly OrganizationImport[]): Promise<void> {
  const { trx } = run;
  const batch = insertBatch(dialectOf(trx));
  let pendingOrganizations: OrganizationImport[] = [];
  let pendingRooms: RoomTable[] = [];
  let pendingMembers: { org_id: string; room_id: string; user_id: string }[] = [];
  let pendingUsers: UserRow[] = [];
  // One write at a time goes to the database while the next rows are read and prepared here; each
  // writes in the order the keys need: organizations before their users and rooms, those before members.
  let inFlight: Promise<unknown> = Promise.resolve();
  const writeAll = async () => {
    const [organizationRows, userRows, roomRows, memberRows] = [pendingOrganizations, pendingUsers, pendingRooms, pendingMembers];
    pendingOrganizations = [];
    pendingUsers = [];
    pendingRooms = [];
    pendingMembers = [];
    if (!writing(run)) return;
    const write = async () => {
      if (organizationRows.length > 0) await listDirectoryVersions(trx, await upsertOrganizationRows(trx, organizationRows, run.at), run.stamp);
      if (userRows.length > 0) await prepareUserUpsert(trx, userRows, { insertOnly: true })();
      for (const rows of chunks(roomRows, BATCH)) await upsertRoomRows(trx, rows, false);
      for (const rows of chunks(memberRows, batch)) await insertMemberRows(trx, rows);
    };
    const previous = inFlight;
    inFlight = previous.then(write);
    inFlight.catch(() => undefined); // awaited on the next turn or at the end
    await previous;
  };

  for (const organization of organizations) {
    pendingOrganizations.push(organization);
    run.counts.organizations += 1;
    const imported: ImportedOrganization = {
      id: organization.id,
      usersInFile: organization.userCount,
      firstUsers: true,
      counts: { users: 0, rooms: 0, members: 0 },
    };
    run.imported.push(imported);
    const before = { ...run.counts };
    for (const user of organization.users()) {
      // changed_in 0: no index can hold users of an organization that had none (see the changed_in migration).
      pendingUsers.push(userRow(organization.id, user, 0, run.at));
      run.counts.users += 1;
      if (pendingUsers.length >= batch) await writeAll();
    }
    for (const room of organization.rooms()) {
      pendingRooms.push({ org_id: organization.id, id: room.id, name: room.name, created_at: run.at, updated_at: run.at });
      for (const [index, userId] of (room.members ?? []).entries()) {
        // With no user stored, a member the file does not list is unknown.
        if (!organization.listedUsers.has(userId)) {
          run.problems.push(unknownMember(organization, room, index));
        }
        pendingMembers.push({ org_id: organization.id, room_id: room.id, user_id: userId });
        // The room, its organization and its users are pending too, and are written first.
        if (pendingMembers.length >= batch) await writeAll();
      }
      run.counts.rooms += 1;
      run.counts.members += room.members?.length ?? 0;
    }
    imported.counts = { users: run.counts.users - before.users, rooms: run.counts.rooms - before.rooms, members: run.counts.members - before.members };
    if (pendingOrganizations.length >= FIRST_LOAD_ORGANIZATIONS) await writeAll();
  }
  await writeAll();
  await inFlight;
}

/** The problem of `room.members[index]`, which names no user of the organization. */
function unknownMember(organization: OrganizationImport, room: RoomImport, index: number): ImportProblem {
  return {
    path: `${room.path}.members[${room.memberIndexes[index]}]`,
    message: `unknown user id "${room.members![index]}" in organization "${organization.id}"`,
  };
}

/**
 * Indexes into room.members of the ids neither the file nor the database knows
 * as users of the organization. With no user stored before (`firstUsers`), the
 * database knows only the file's users (and may have dropped the key to look
 * them up by).
 */
async function unknownMembers(trx: Transaction<Database>, organization: OrganizationImport, room: RoomImport, firstUsers: boolean): Promise<number[]> {
  const members = room.members ?? [];
  const notInFile = members.flatMap((userId, index) => (organization.listedUsers.has(userId) ? [] : [index]));
  if (firstUsers) return notInFile;
  const known = new Set<string>();
  for (const batch of chunks(
    notInFile.map((index) => members[index]!),
    BATCH,
  )) {
    const rows = await trx
      .selectFrom('users')
      .select('id')
      .where('org_id', '=', organization.id)
      .where('id', 'in', batch)
      .where('status', '<>', 'deleted')
      .execute();
    for (const row of rows) known.add(row.id);
  }
  return notInFile.filter((index) => !known.has(members[index]!));
}

async function upsertRoom(run: ImportRun, orgId: string, room: RoomImport, version: number): Promise<void> {
  const { trx, at } = run;
  // A room new to the organization (or listed again after a delete) has a member list new as of this version, whatever the file says.
  const row: RoomTable = { org_id: orgId, id: room.id, name: room.name, created_at: at, updated_at: at, members_changed_in: version };
  await upsertRoomRows(trx, [row], room.members !== undefined);
  if (room.members === undefined) return;
  await trx.deleteFrom('room_members').where('org_id', '=', orgId).where('room_id', '=', room.id).execute();
  for (const batch of chunks(room.members, insertBatch(dialectOf(trx)))) {
    await insertMemberRows(
      trx,
      batch.map((userId) => ({ org_id: orgId, room_id: room.id, user_id: userId })),
    );
  }
}

/**
 * Problems for users of the batch whose email already belongs to a stored user
 * the file does not list (a listed user may give up its email to another).
 */
async function emailConflicts(trx: Transaction<Database>, organization: OrganizationImport, users: readonly UserImport[]): Promise<ImportProblem[]> {
  const userByEmail = new Map(users.map((user) => [user.email.toLowerCase(), user]));
  const rows = await trx
    .selectFrom('users')
    .select(['id', 'email_lower'])
    .where('org_id', '=', organization.id)
    .where('email_lower', 'in', [...userByEmail.keys()])
    .execute();
  const problems: ImportProblem[] = [];
  for (const row of rows) {
    const user = userByEmail.get(row.email_lower);
    if (user !== undefined && user.id !== row.id && !organization.listedUsers.has(row.id)) {
      problems.push({
        path: `${user.path}.email`,
        message: `email "${user.email}" already belongs to user "${row.id}" of organization "${organization.id}"`,
      });
    }
  }
  return problems;
}

/**
 * Writes the organization's users as the file gives them, batch by batch
 * (upsert by id; a plain insert for an organization's first users), each batch
 * checked first for emails taken by stored users.
 */
async function upsertUsers(run: ImportRun, organization: OrganizationImport, firstUsers: boolean, version: number): Promise<void> {
  const { trx } = run;
  const orgId = organization.id;
  if (writing(run) && !firstUsers) {
    // Listed users may trade emails among themselves; park their current emails
    // on values no real email can take (emails have no spaces) so the unique
    // index holds row by row while the upserts run.
    for (const batch of batches(organization.listedUsers.keys())) {
      await trx
        .updateTable('users')
        .set({ email_lower: sql<string>`' parked:' || id` })
        .where('org_id', '=', orgId)
        .where('id', 'in', batch)
        .execute();
    }
  }
  let previous: Promise<unknown> = Promise.resolve();
  for (const batch of batches(organization.users(), insertBatch(dialectOf(trx)))) {
    // An organization without stored users (a first import) has no email to collide with.
    if (!firstUsers) {
      for (const part of chunks(batch, BATCH)) run.problems.push(...(await emailConflicts(trx, organization, part)));
    }
    if (!writing(run)) continue;
    const rows = batch.map((user) => userRow(orgId, user, version, run.at));
    // The database writes one batch while the next is read and prepared here.
    const write = prepareUserUpsert(trx, rows, { insertOnly: firstUsers });
    await previous;
    previous = write();
    previous.catch(() => undefined); // awaited on the next turn or after the loop
    run.counts.users += rows.length;
  }
  await previous;
}
