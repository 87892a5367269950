import { sql, type Kysely, type Transaction } from 'kysely';
import { hashPassword } from '../auth/password-hash.ts';
import {
  insertBatch,
  insertMemberRows,
  prepareUserUpsert,
  refreshPlannerStatistics,
  serializeImports,
  withoutUserIndexes,
  type UserRow,
} from '../db/dialect-sql.ts';
import { dialectOf } from '../db/dialect.ts';
import type { Database } from '../db/tables.ts';
import type { DirectoryFile, ImportProblem, OrganizationImport } from '../domain/directory-file.ts';
import { foldedKeys } from '../domain/fold.ts';
import { needsInvitation } from '../domain/signatory-rules.ts';
import { upsertCredential } from '../repositories/credential-repository.ts';

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
  const row = await trx.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('count')).executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Rows per multi-row INSERT: well under SQLite's 32,766 bound parameters. */
const BATCH = 500;

function chunks<T>(items: readonly T[], size = BATCH): T[][] {
  const result: T[][] = [];
  for (let i = 0; i < items.length; i += size) result.push(items.slice(i, i + size));
  return result;
}

/**
 * Applies a validated directory file in one transaction: upserts by id, replaces
 * room member lists, bumps each organization's directory version. Checks that
 * need the database (members and emails of users imported earlier) run inside
 * the same transaction; any problem rolls everything back.
 */
export async function importDirectory(db: Kysely<Database>, file: DirectoryFile, fileProblems: readonly ImportProblem[] = []): Promise<ImportCounts> {
  if (fileProblems.length > 0 && !needsDatabaseChecks(file)) throw new ImportRejected([...fileProblems]);
  const hashed = fileProblems.length > 0 ? [] : await Promise.all(
    file.credentials.map(async (credential) => ({
      username: credential.username,
      passwordHash: await hashPassword(credential.password),
      scope: credential.organizations,
    })),
  );
  const counts: ImportCounts = { organizations: 0, users: 0, rooms: 0, members: 0, credentials: hashed.length };
  await db.transaction().execute(async (trx) => {
    await serializeImports(trx);
    const problems: ImportProblem[] = [...fileProblems];
    // Asked once per organization: whether this import brings its first users.
    const firstUsers = new Map<string, boolean>();
    for (const organization of file.organizations) {
      firstUsers.set(organization.id, !(await hasStoredUsers(trx, organization.id)));
      problems.push(...(await conflictsWithDatabase(trx, organization, file, firstUsers.get(organization.id)!)));
    }
    if (problems.length > 0) throw new ImportRejected(problems);
    for (const organization of file.organizations) {
      await upsertOrganization(trx, organization, firstUsers.get(organization.id)!, counts);
    }
    await refreshPlannerStatistics(trx);
    for (const credential of hashed) await upsertCredential(trx, credential);
  });
  return counts;
}

/** Whether the file's valid parts name anything the database must confirm (members, emails). */
function needsDatabaseChecks(file: DirectoryFile): boolean {
  return file.externalMembers.length > 0 || file.organizations.some((organization) => organization.users.length > 0);
}

async function conflictsWithDatabase(
  trx: Transaction<Database>,
  organization: OrganizationImport,
  file: DirectoryFile,
  firstUsers: boolean,
): Promise<ImportProblem[]> {
  const problems: ImportProblem[] = [];
  const references = file.externalMembers.filter((reference) => reference.orgId === organization.id);
  const known = new Set<string>();
  for (const batch of chunks([...new Set(references.map((reference) => reference.userId))])) {
    const rows = await trx.selectFrom('users').select('id').where('org_id', '=', organization.id).where('id', 'in', batch).execute();
    for (const row of rows) known.add(row.id);
  }
  for (const reference of references) {
    if (!known.has(reference.userId)) {
      problems.push({ path: reference.path, message: `unknown user id "${reference.userId}" in organization "${organization.id}"` });
    }
  }

  // An organization without stored users (a first import) has no email to collide with.
  if (firstUsers) return problems;
  const fileUserIds = new Set(organization.users.map((user) => user.id));
  const userByEmail = new Map(organization.users.map((user) => [user.email.toLowerCase(), user]));
  for (const batch of chunks([...userByEmail.keys()])) {
    const rows = await trx
      .selectFrom('users')
      .select(['id', 'email_lower'])
      .where('org_id', '=', organization.id)
      .where('email_lower', 'in', batch)
      .execute();
    for (const row of rows) {
      const user = userByEmail.get(row.email_lower);
      // A user the file also lists may give up its email to another listed user.
      if (user !== undefined && user.id !== row.id && !fileUserIds.has(row.id)) {
        problems.push({
          path: `${user.path}.email`,
          message: `email "${user.email}" already belongs to user "${row.id}" of organization "${organization.id}"`,
        });
      }
    }
  }
  return problems;
}

async function upsertOrganization(trx: Transaction<Database>, organization: OrganizationImport, firstUsers: boolean, counts: ImportCounts): Promise<void> {
  const orgId = organization.id;
  const setting = organization.externalSignatories;
  await trx
    .insertInto('organizations')
    .values({ id: orgId, name: organization.name, external_signatories: setting === true ? 1 : 0 })
    .onConflict((oc) =>
      oc.column('id').doUpdateSet((eb) => ({
        name: eb.ref('excluded.name'),
        // Left out of the file: the stored setting stays.
        external_signatories: setting === undefined ? eb.ref('organizations.external_signatories') : eb.ref('excluded.external_signatories'),
        directory_version: eb(eb.ref('organizations.directory_version'), '+', 1),
      })),
    )
    .execute();
  counts.organizations += 1;

  if (isBulkLoad(organization.users.length, await countAllUsers(trx))) {
    await withoutUserIndexes(trx, { withKeys: firstUsers }, () => upsertUsers(trx, organization, firstUsers, counts));
  } else {
    await upsertUsers(trx, organization, firstUsers, counts);
  }

  for (const room of organization.rooms) {
    await trx
      .insertInto('rooms')
      .values({ org_id: orgId, id: room.id, name: room.name })
      .onConflict((oc) => oc.columns(['org_id', 'id']).doUpdateSet((eb) => ({ name: eb.ref('excluded.name') })))
      .execute();
    counts.rooms += 1;
    if (room.members === undefined) continue;
    await trx.deleteFrom('room_members').where('org_id', '=', orgId).where('room_id', '=', room.id).execute();
    for (const batch of chunks(room.members, insertBatch(dialectOf(trx)))) {
      await insertMemberRows(trx, batch.map((userId) => ({ org_id: orgId, room_id: room.id, user_id: userId })));
    }
    counts.members += room.members.length;
  }
}

/** Writes the organization's listed users (upsert by id; a plain insert for an organization's first users). */
async function upsertUsers(trx: Transaction<Database>, organization: OrganizationImport, firstUsers: boolean, counts: ImportCounts): Promise<void> {
  const orgId = organization.id;
  // Listed users may trade emails among themselves; park their current emails
  // on values no real email can take (emails have no spaces) so the unique
  // index holds row by row while the upserts run.
  const parked = firstUsers ? [] : organization.users.map((user) => user.id);
  for (const batch of chunks(parked)) {
    await trx
      .updateTable('users')
      .set({ email_lower: sql<string>`' parked:' || id` })
      .where('org_id', '=', orgId)
      .where('id', 'in', batch)
      .execute();
  }
  let previous: Promise<unknown> = Promise.resolve();
  for (const batch of chunks(organization.users, insertBatch(dialectOf(trx)))) {
    const rows = batch.map((user): UserRow => {
      const keys = foldedKeys(user);
      return {
        org_id: orgId,
        id: user.id,
        firstname: user.firstname,
        lastname: user.lastname,
        email: user.email,
        email_lower: user.email.toLowerCase(),
        external: user.external ? 1 : 0,
        status: user.status,
        needs_invite: needsInvitation(user) ? 1 : 0,
        firstname_key: keys.firstnameKey,
        lastname_key: keys.lastnameKey,
        email_key: keys.emailKey,
        search_key: keys.searchKey,
      };
    });
    // The database writes one batch while the next is prepared here.
    const write = prepareUserUpsert(trx, rows, { insertOnly: firstUsers });
    await previous;
    previous = write();
    previous.catch(() => undefined); // awaited on the next turn or after the loop
    counts.users += rows.length;
  }
  await previous;
}
