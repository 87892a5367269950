import { chunks } from '../db/chunks.ts';
import { sql, type Kysely, type Selectable } from 'kysely';
import { containsAllTerms, isAmong } from '../db/dialect-sql.ts';
import { compiledOnce } from '../db/compiled-once.ts';
import { dialectOf } from '../db/dialect.ts';
import { preparedStatements } from '../db/prepared-statements.ts';
import type { Database, OrganizationTable, RoomTable, UserTable } from '../db/tables.ts';
import type { Tally } from '../domain/signatory-rules.ts';
import type { ChangeTable } from '../lib/change-scoped-cache.ts';

export interface OrganizationRow {
  id: string;
  externalSignatories: boolean;
  directoryVersion: number;
  /** It has suspended or deleted users, whom lookups must pass over. */
  hasNonCandidates: boolean;
}

/** Whether the room exists in that organization. */
export async function roomExists(db: Kysely<Database>, orgId: string, roomId: string): Promise<boolean> {
  const row = await db.selectFrom('rooms').select('id').where('org_id', '=', orgId).where('id', '=', roomId).executeTakeFirst();
  return row !== undefined;
}

/** The tables a lookup's scope is read from (user_tallies aside: every write that changes it bumps its organization's version). */
export const LOOKUP_SCOPE_TABLES = ['organizations', 'rooms'] as const satisfies readonly ChangeTable[];

/** The rows of findLookupScope: the organization's, joined with its tallies of the organization and the room. */
const lookupScopeRows = compiledOnce(['orgId', 'roomId'], (db, { orgId, roomId }) =>
  db
    .selectFrom('organizations as o')
    .leftJoin('user_tallies as t', (join) => join.onRef('t.org_id', '=', 'o.id').on('t.room_id', 'in', ['', roomId]))
    .select((eb) => [
      'o.id',
      'o.external_signatories',
      'o.directory_version',
      eb.exists(eb.selectFrom('rooms as r').select('r.id').whereRef('r.org_id', '=', 'o.id').where('r.id', '=', roomId)).as('room_exists'),
      't.room_id',
      't.external',
      't.needs_invite',
      't.candidate',
      't.users',
    ])
    .where('o.id', '=', orgId),
);

/** What a lookup of one room reads of its organization: the organization, whether the room exists, and the tallies of both. */
export interface RoomScope {
  organization: OrganizationRow;
  roomExists: boolean;
  tallies: { organization: Tally[]; members: Tally[] };
}

/**
 * The organization, whether the room exists in it, and the organization's users and the room's
 * members tallied by kind, in one statement (so all of one version: the tallies count what a
 * lookup without terms finds at `directoryVersion`); undefined for an unknown organization.
 */
export async function findLookupScope(db: Kysely<Database>, orgId: string, roomId: string): Promise<RoomScope | undefined> {
  // By key, read again after every commit to the organization: named (prepared-statements.ts), built once (compiled-once.ts).
  const rows = await preparedStatements(() => lookupScopeRows(db, { orgId, roomId }));
  const row = rows[0];
  if (row === undefined) return undefined;
  const tallies: RoomScope['tallies'] = { organization: [], members: [] };
  for (const tally of rows) {
    if (tally.room_id === null) continue;
    (tally.room_id === '' ? tallies.organization : tallies.members).push(toTally(tally as TallyRow));
  }
  return {
    organization: toOrganizationRow(row, tallies.organization),
    // 1/0 on SQLite, true/false on PostgreSQL.
    roomExists: Boolean(row.room_exists),
    tallies,
  };
}

/**
 * An organization as a lookup reads it, its users tallied, and the rooms asked for that exist with
 * their members tallied, all of one directory version (read with the changes an index takes in:
 * search-index-repository.ts, readChangesAtOnce).
 */
export interface DirectoryScope {
  organization: OrganizationRow;
  tallies: Tally[];
  /** The rooms asked for that exist, with their members tallied. */
  rooms: ReadonlyMap<string, Tally[]>;
  /** The rooms asked for. */
  asked: ReadonlySet<string>;
}

/** What findLookupScope reads, taken from a DirectoryScope; undefined when the room was not asked for. */
export function roomScopeOf(scope: DirectoryScope, roomId: string): RoomScope | undefined {
  if (!scope.asked.has(roomId)) return undefined;
  const members = scope.rooms.get(roomId);
  return { organization: scope.organization, roomExists: members !== undefined, tallies: { organization: scope.tallies, members: members ?? [] } };
}

/** A row of user_tallies (its flags 1/0 on both databases, its count a string where PostgreSQL sums). */
export interface TallyRow {
  external: number;
  needs_invite: number;
  candidate: number;
  users: number | string;
}

export function toTally(row: TallyRow): Tally {
  return { external: row.external === 1, needsInvitation: row.needs_invite === 1, candidate: row.candidate === 1, users: Number(row.users) };
}

/** The organization's row as lookups read it, `tallies` its users'. */
export function toOrganizationRow(
  row: { id: string; external_signatories: number; directory_version: number | string },
  tallies: readonly Tally[],
): OrganizationRow {
  return {
    id: row.id,
    externalSignatories: row.external_signatories === 1,
    directoryVersion: Number(row.directory_version),
    hasNonCandidates: tallies.some((tally) => !tally.candidate && tally.users > 0),
  };
}

/** A stored user, as the directory API reads it (deleted users are never read). */
export type UserRecord = Selectable<UserTable>;
export type RoomRecord = Selectable<RoomTable> & { member_count: number };
export type OrganizationRecord = Selectable<OrganizationTable>;

/** Those of `orgIds` that are no organization. */
export async function missingOrganizations(db: Kysely<Database>, orgIds: readonly string[]): Promise<string[]> {
  if (orgIds.length === 0) return [];
  const found = new Set(
    (
      await db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', [...orgIds])
        .execute()
    ).map((row) => row.id),
  );
  return orgIds.filter((id) => !found.has(id));
}

/** The organization, or undefined. */
export async function findOrganization(db: Kysely<Database>, orgId: string): Promise<OrganizationRecord | undefined> {
  return db.selectFrom('organizations').selectAll().where('id', '=', orgId).executeTakeFirst();
}

/** A page of organizations by id (`ids` undefined: all of them), and how many there are. */
export async function listOrganizations(
  db: Kysely<Database>,
  ids: readonly string[] | undefined,
  offset: number,
  limit: number,
): Promise<{ total: number; rows: OrganizationRecord[] }> {
  if (ids !== undefined && ids.length === 0) return { total: 0, rows: [] };
  const scoped = ids === undefined ? db.selectFrom('organizations') : db.selectFrom('organizations').where('id', 'in', ids);
  const count = await scoped.select((eb) => eb.fn.countAll<number | string>().as('count')).executeTakeFirstOrThrow();
  const rows = await scoped.selectAll().orderBy('id').offset(offset).limit(limit).execute();
  return { total: Number(count.count), rows };
}

/** The user with this id (not deleted), or undefined. */
export async function findUser(db: Kysely<Database>, orgId: string, userId: string): Promise<UserRecord | undefined> {
  return db.selectFrom('users').selectAll().where('org_id', '=', orgId).where('id', '=', userId).where('status', '<>', 'deleted').executeTakeFirst();
}

/**
 * Whether the room exists, and the user with this id (not deleted) if there is one: one statement,
 * for a member change, made while the organization's writers wait for it.
 */
export async function findRoomAndUser(
  db: Kysely<Database>,
  orgId: string,
  roomId: string,
  userId: string,
): Promise<{ roomExists: boolean; user: UserRecord | undefined }> {
  const { rows } = await sql<Partial<UserRecord> & { room_exists: boolean | number }>`
    select u.*, exists (select 1 from rooms r where r.org_id = ${orgId} and r.id = ${roomId}) as room_exists
    from (select 1 as one) probe
    left join users u on u.org_id = ${orgId} and u.id = ${userId} and u.status <> 'deleted'`.execute(db);
  const { room_exists: roomExists, ...user } = rows[0]!;
  return { roomExists: roomExists === true || roomExists === 1, user: user.id === null || user.id === undefined ? undefined : (user as UserRecord) };
}

/**
 * The users of these ids (not deleted, as findUser) and the rooms of these ids that exist, as two
 * compiled statements, for the directory writer to send ahead of its changes' turns
 * (pipelined-transactions.ts); one text whatever the number of ids.
 */
export function usersAndRoomsByIds(db: Kysely<Database>, orgId: string, userIds: readonly string[], roomIds: readonly string[]) {
  const dialect = dialectOf(db);
  return {
    users:
      userIds.length === 0
        ? undefined
        : db
            .selectFrom('users')
            .selectAll()
            .where('org_id', '=', orgId)
            .where(isAmong(dialect, sql.ref('id'), userIds))
            .where('status', '<>', 'deleted')
            .compile(),
    rooms:
      roomIds.length === 0
        ? undefined
        : db
            .selectFrom('rooms')
            .select('id')
            .where('org_id', '=', orgId)
            .where(isAmong(dialect, sql.ref('id'), roomIds))
            .compile(),
  };
}

/** Whether the user is a member of the room. */
export async function isRoomMember(db: Kysely<Database>, orgId: string, roomId: string, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('room_members')
    .select('user_id')
    .where('org_id', '=', orgId)
    .where('room_id', '=', roomId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row !== undefined;
}

/** The stored row of this id, deleted or not (a deleted user's id may be taken again). */
export async function findUserRow(db: Kysely<Database>, orgId: string, userId: string): Promise<UserRecord | undefined> {
  return db.selectFrom('users').selectAll().where('org_id', '=', orgId).where('id', '=', userId).executeTakeFirst();
}

/**
 * The users who hold an email (ignoring case) and who read as a userName (ignoring case: their
 * own, or their email while they have none), if any, and the status of the stored row with `id`
 * (deleted or not) when one is asked for: one statement, each part on its unique index (round
 * trips saved for every user written, made while writers of the organization wait).
 */
export async function findHolders(
  db: Kysely<Database>,
  orgId: string,
  keys: { id?: string; emailLower: string; userNameLower: string },
): Promise<{ idStatus: string | undefined; emailOwner: string | undefined; userNameOwner: string | undefined }> {
  let holders = db
    .selectFrom('users')
    .select([sql<string>`'email'`.as('holds'), 'id', 'status'])
    .where('org_id', '=', orgId)
    .where('email_lower', '=', keys.emailLower)
    .unionAll(
      db
        .selectFrom('users')
        .select([sql<string>`'userName'`.as('holds'), 'id', 'status'])
        .where('org_id', '=', orgId)
        // Spelled as the unique index's expression, which the databases must see to use it.
        .where(sql`coalesce(user_name_lower, email_lower)`, '=', keys.userNameLower),
    );
  if (keys.id !== undefined)
    holders = holders.unionAll(
      db
        .selectFrom('users')
        .select([sql<string>`'id'`.as('holds'), 'id', 'status'])
        .where('org_id', '=', orgId)
        .where('id', '=', keys.id),
    );
  const rows = await holders.execute();
  return {
    idStatus: rows.find((row) => row.holds === 'id')?.status,
    emailOwner: rows.find((row) => row.holds === 'email')?.id,
    userNameOwner: rows.find((row) => row.holds === 'userName')?.id,
  };
}

/** Locks the room's row for the rest of the transaction (PostgreSQL; SQLite has one writer): an upload inserting a document into it waits, or is waited for. */
export async function lockRoom(db: Kysely<Database>, orgId: string, roomId: string): Promise<void> {
  if (dialectOf(db) === 'postgres') await db.selectFrom('rooms').select('id').where('org_id', '=', orgId).where('id', '=', roomId).forUpdate().execute();
}

/** The users route's query (contract section 8): terms as in the lookup, an optional status, the sort of the lookup. */
export interface UserListQuery {
  orgId: string;
  terms: readonly string[];
  status?: string | undefined;
  sortColumns: readonly ('lastname_key' | 'firstname_key' | 'email_key')[];
  direction: 'asc' | 'desc';
  /** Only the members of this room. */
  roomId?: string | undefined;
}

function usersMatching(db: Kysely<Database>, query: UserListQuery) {
  let select = db.selectFrom('users as u').where('u.org_id', '=', query.orgId).where('u.status', '<>', 'deleted');
  if (query.status !== undefined) select = select.where('u.status', '=', query.status as UserTable['status']);
  for (const condition of containsAllTerms(dialectOf(db), sql.ref('u.search_key'), query.terms)) select = select.where(condition);
  if (query.roomId !== undefined) {
    const roomId = query.roomId;
    select = select.where((eb) =>
      eb.exists(
        eb
          .selectFrom('room_members as m')
          .select('m.user_id')
          .whereRef('m.org_id', '=', 'u.org_id')
          .whereRef('m.user_id', '=', 'u.id')
          .where('m.room_id', '=', roomId),
      ),
    );
  }
  return select;
}

/** A page of the organization's users (or a room's members) and how many match. */
export async function listUsers(db: Kysely<Database>, query: UserListQuery, offset: number, limit: number): Promise<{ total: number; rows: UserRecord[] }> {
  const count = await usersMatching(db, query)
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .executeTakeFirstOrThrow();
  let select = usersMatching(db, query).selectAll('u');
  for (const column of [...query.sortColumns, 'id' as const]) select = select.orderBy(`u.${column}`, query.direction);
  const rows = await select.offset(offset).limit(limit).execute();
  return { total: Number(count.count), rows };
}

/** What a SCIM `/Users` filter tests (every condition holds): userName and email ignoring case, the rest exactly. */
export interface ScimUserQuery {
  orgId: string;
  userNameLower?: string[];
  emailLower?: string[];
  externalId?: string[];
  id?: string[];
  /** Lower-cased: as the lookup derives it (first and last name, else the email). Not indexed: a scan. */
  displayNameLower?: string[];
}

/**
 * A page of the organization's users matching a SCIM filter, in creation order (seq), and how many
 * match. userName is what the unique index on coalesce(user_name_lower, email_lower) holds, so an
 * `eq` on it reads one index entry.
 */
export async function findScimUsers(db: Kysely<Database>, query: ScimUserQuery, offset: number, limit: number): Promise<{ total: number; rows: UserRecord[] }> {
  let select = db.selectFrom('users as u').where('u.org_id', '=', query.orgId).where('u.status', '<>', 'deleted');
  for (const value of query.userNameLower ?? []) select = select.where(sql<string>`coalesce(u.user_name_lower, u.email_lower)`, '=', value);
  for (const value of query.emailLower ?? []) select = select.where('u.email_lower', '=', value);
  for (const value of query.externalId ?? []) select = select.where('u.external_id', '=', value);
  for (const value of query.id ?? []) select = select.where('u.id', '=', value);
  for (const value of query.displayNameLower ?? []) {
    select = select.where(
      sql<string>`lower(case
        when coalesce(u.firstname, '') = '' and coalesce(u.lastname, '') = '' then u.email
        when coalesce(u.firstname, '') = '' then u.lastname
        when coalesce(u.lastname, '') = '' then u.firstname
        else u.firstname || ' ' || u.lastname end)`,
      '=',
      value,
    );
  }
  const rows = limit === 0 ? [] : await select.selectAll('u').orderBy('u.seq').offset(offset).limit(limit).execute();
  // A first page that is not full is every match: the count would read them again.
  if (offset === 0 && rows.length < limit) return { total: rows.length, rows };
  const count = await select.select((eb) => eb.fn.countAll<number | string>().as('count')).executeTakeFirstOrThrow();
  return { total: Number(count.count), rows };
}

/** What a SCIM `/Groups` filter tests (every condition holds): the room's name ignoring case, the rest exactly. */
export interface ScimGroupQuery {
  orgId: string;
  nameLower?: string[];
  externalId?: string[];
  id?: string[];
  /** User ids each a member of the room. */
  member?: string[];
}

/** A page of the organization's rooms matching a SCIM filter, by id, and how many match. */
export async function findScimGroups(
  db: Kysely<Database>,
  query: ScimGroupQuery,
  offset: number,
  limit: number,
): Promise<{ total: number; rows: RoomRecord[] }> {
  let select = withMemberCount(db).where('r.org_id', '=', query.orgId);
  let count = db.selectFrom('rooms as r').where('r.org_id', '=', query.orgId);
  if (query.nameLower !== undefined) {
    // Compared ignoring case as JavaScript folds it: SQLite's lower() folds ASCII only ("Ärzte").
    // An organization has rooms by the hundreds or thousands, so their names are read here.
    const names = await db.selectFrom('rooms').select(['id', 'name']).where('org_id', '=', query.orgId).execute();
    const ids = names.filter((room) => query.nameLower!.every((value) => room.name.toLowerCase() === value)).map((room) => room.id);
    if (ids.length === 0) return { total: 0, rows: [] };
    select = select.where('r.id', 'in', ids);
    count = count.where('r.id', 'in', ids);
  }
  for (const value of query.externalId ?? []) {
    select = select.where('r.external_id', '=', value);
    count = count.where('r.external_id', '=', value);
  }
  for (const value of query.id ?? []) {
    select = select.where('r.id', '=', value);
    count = count.where('r.id', '=', value);
  }
  for (const value of query.member ?? []) {
    // By the members' primary key (organization, room, user): one look-up per room.
    const isMember = sql<boolean>`exists (select 1 from room_members m where m.org_id = r.org_id and m.room_id = r.id and m.user_id = ${value})`;
    select = select.where(isMember);
    count = count.where(isMember);
  }
  const total = await count.select((eb) => eb.fn.countAll<number | string>().as('count')).executeTakeFirstOrThrow();
  const rows = limit === 0 ? [] : await select.orderBy('r.id').offset(offset).limit(limit).execute();
  return { total: Number(total.count), rows: rows.map(toRoomRecord) };
}

/** The user ids of a room's members, in id order. */
export async function findRoomMemberIds(db: Kysely<Database>, orgId: string, roomId: string): Promise<string[]> {
  const rows = await db.selectFrom('room_members').select('user_id').where('org_id', '=', orgId).where('room_id', '=', roomId).orderBy('user_id').execute();
  return rows.map((row) => row.user_id);
}

/** The users (not deleted) of the organization among `ids`. */
export async function findUsersByIds(db: Kysely<Database>, orgId: string, ids: readonly string[]): Promise<UserRecord[]> {
  const found: UserRecord[] = [];
  for (const batch of chunks(ids, 500)) {
    found.push(...(await db.selectFrom('users').selectAll().where('org_id', '=', orgId).where('id', 'in', batch).where('status', '<>', 'deleted').execute()));
  }
  return found;
}

/** Members counted from the tallies (a few rows per room). */
function withMemberCount(db: Kysely<Database>) {
  return db
    .selectFrom('rooms as r')
    .selectAll('r')
    .select((eb) =>
      eb
        .selectFrom('user_tallies as t')
        .select((inner) => inner.fn.coalesce(inner.fn.sum<number | string>('t.users'), sql<number>`0`).as('n'))
        .whereRef('t.org_id', '=', 'r.org_id')
        .whereRef('t.room_id', '=', 'r.id')
        .as('member_count'),
    );
}

function toRoomRecord(row: Selectable<RoomTable> & { member_count: number | string | null }): RoomRecord {
  return { ...row, member_count: Number(row.member_count ?? 0) };
}

/** The room, with its number of members, or undefined. */
export async function findRoom(db: Kysely<Database>, orgId: string, roomId: string): Promise<RoomRecord | undefined> {
  const row = await withMemberCount(db).where('r.org_id', '=', orgId).where('r.id', '=', roomId).executeTakeFirst();
  return row === undefined ? undefined : toRoomRecord(row);
}

/** A page of the organization's rooms by id, and how many there are. */
export async function listRooms(db: Kysely<Database>, orgId: string, offset: number, limit: number): Promise<{ total: number; rows: RoomRecord[] }> {
  const count = await db
    .selectFrom('rooms')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  const rows = await withMemberCount(db).where('r.org_id', '=', orgId).orderBy('r.id').offset(offset).limit(limit).execute();
  return { total: Number(count.count), rows: rows.map(toRoomRecord) };
}

/** Whether the room holds documents. */
export async function roomHasDocuments(db: Kysely<Database>, orgId: string, roomId: string): Promise<boolean> {
  const row = await db.selectFrom('documents').select('id').where('org_id', '=', orgId).where('room_id', '=', roomId).limit(1).executeTakeFirst();
  return row !== undefined;
}
