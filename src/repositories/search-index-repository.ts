import { sql, type Kysely } from 'kysely';
import { chunks } from '../db/chunks.ts';
import { notIndexed } from '../db/dialect-sql.ts';
import { compiledOnce } from '../db/compiled-once.ts';
import { dialectOf } from '../db/dialect.ts';
import { preparedStatements } from '../db/prepared-statements.ts';
import type { Database } from '../db/tables.ts';
import type { ChangedUser, IndexedUser } from '../domain/search-index.ts';
import { isCandidateStatus, sortKeyOrder, type SortField, type Tally } from '../domain/signatory-rules.ts';
import { toOrganizationRow, toTally, type DirectoryScope, type TallyRow } from './directory-repository.ts';
import { SORT_KEY_COLUMNS } from './signatory-repository.ts';

/**
 * What the in-memory search index is built from, read in pieces of a few
 * thousand rows (each its own statement) by the loading process, inside one
 * read-only transaction, so the pieces fit together.
 */

/** The organizations with at least `minUsers` users, largest first. */
export async function findOrganizationsBySize(db: Kysely<Database>, minUsers: number): Promise<{ orgId: string; users: number }[]> {
  const rows = await db
    .selectFrom('user_tallies')
    .select((eb) => ['org_id', eb.fn.sum<number | string>('users').as('users')])
    .where('room_id', '=', '')
    .groupBy('org_id')
    .having((eb) => eb.fn.sum('users'), '>=', minUsers)
    .orderBy('users', 'desc')
    .execute();
  return rows.map((row) => ({ orgId: row.org_id, users: Number(row.users) }));
}

/** The organization's directory version and number of users; undefined for an unknown organization. */
export async function findOrganizationSize(db: Kysely<Database>, orgId: string): Promise<{ version: number; users: number } | undefined> {
  const row = await db
    .selectFrom('organizations as o')
    .select((eb) => [
      'o.directory_version',
      eb
        .selectFrom('user_tallies as t')
        .select((inner) => inner.fn.coalesce(inner.fn.sum<number | string>('t.users'), sql<number>`0`).as('users'))
        .whereRef('t.org_id', '=', 'o.id')
        .where('t.room_id', '=', '')
        .as('users'),
    ])
    .where('o.id', '=', orgId)
    .executeTakeFirst();
  return row === undefined ? undefined : { version: Number(row.directory_version), users: Number(row.users ?? 0) };
}

/** The stamp the import that made the organization's directory `version` listed it with; undefined if none did (see the directory-states migration). */
export async function findDirectoryStamp(db: Kysely<Database>, orgId: string, version: number): Promise<string | undefined> {
  const row = await db.selectFrom('directory_states').select('stamp').where('org_id', '=', orgId).where('version', '=', version).executeTakeFirst();
  return row?.stamp;
}

/** The organization's directory version, or undefined once it is gone. */
export async function findDirectoryVersion(db: Kysely<Database>, orgId: string): Promise<number | undefined> {
  const row = await db.selectFrom('organizations').select('directory_version').where('id', '=', orgId).executeTakeFirst();
  return row === undefined ? undefined : Number(row.directory_version);
}

/** The directory versions of the organizations that exist among `orgIds`. */
export async function findDirectoryVersions(db: Kysely<Database>, orgIds: readonly string[]): Promise<Map<string, number>> {
  const versions = new Map<string, number>();
  for (const batch of chunks(orgIds, 500)) {
    const rows = await db.selectFrom('organizations').select(['id', 'directory_version']).where('id', 'in', batch).execute();
    for (const row of rows) versions.set(row.id, Number(row.directory_version));
  }
  return versions;
}

/**
 * The organization's next users after `afterSeq`, in seq order: walked along
 * the table's own key (the organization column is kept out of the index
 * choice, which would otherwise sort the whole organization for each piece).
 */
export async function readIndexedUsers(db: Kysely<Database>, orgId: string, afterSeq: number, limit: number): Promise<IndexedUser[]> {
  const rows = await db
    .selectFrom('users as u')
    .select(['u.seq', 'u.search_key', 'u.external', 'u.needs_invite', 'u.status'])
    .where('u.seq', '>', afterSeq)
    .where(notIndexed(dialectOf(db), sql.ref<string>('u.org_id')), '=', orgId)
    .orderBy('u.seq')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    seq: Number(row.seq),
    searchKey: row.search_key,
    external: row.external === 1,
    needsInvite: row.needs_invite === 1,
    candidate: isCandidateStatus(row.status),
  }));
}

/** Where a walk along a sort order stopped: the sort keys and id of the last user read. */
export type SortPosition = readonly [string, string, string, string];

/**
 * The seqs of the organization's next users in the sort order of `field` (ascending), after
 * `after`. Only seqs come back, read from the sort index (on PostgreSQL it carries them): the keys
 * of the last one, where the next piece starts, are read by its seq. Rows of five columns cost
 * the loader most of its time on PostgreSQL, in the driver's parsing.
 */
export async function readSortOrder(
  db: Kysely<Database>,
  orgId: string,
  field: SortField,
  after: SortPosition | undefined,
  limit: number,
): Promise<{ seqs: number[]; last: SortPosition | undefined }> {
  const columns = [...sortKeyOrder(field).map((key) => `u.${SORT_KEY_COLUMNS[key]}` as const), 'u.id' as const];
  let query = db.selectFrom('users as u').select('u.seq').where('u.org_id', '=', orgId);
  if (after !== undefined) {
    query = query.where(sql<boolean>`(${sql.join(columns.map((column) => sql.ref(column)))}) > (${sql.join(after)})`);
  }
  for (const column of columns) query = query.orderBy(column);
  const seqs = (await query.limit(limit).execute()).map((row) => Number(row.seq));
  const lastSeq = seqs.at(-1);
  if (lastSeq === undefined) return { seqs, last: undefined };
  const last = await db.selectFrom('users as u').select(columns).where('u.seq', '=', lastSeq).executeTakeFirstOrThrow();
  const values = columns.map((column) => last[column.slice(2) as keyof typeof last]);
  return { seqs, last: [values[0]!, values[1]!, values[2]!, values[3]!] };
}

/** The seqs of the room's next members after the user id `afterUserId`, by user id. */
export async function readRoomMemberSeqs(
  db: Kysely<Database>,
  orgId: string,
  roomId: string,
  afterUserId: string,
  limit: number,
): Promise<{ seqs: number[]; last: string | undefined }> {
  const rows = await db
    .selectFrom('room_members as m')
    .innerJoin('users as u', (join) => join.onRef('u.org_id', '=', 'm.org_id').onRef('u.id', '=', 'm.user_id'))
    .select(['m.user_id', 'u.seq'])
    .where('m.org_id', '=', orgId)
    .where('m.room_id', '=', roomId)
    .where('m.user_id', '>', afterUserId)
    .orderBy('m.user_id')
    .limit(limit)
    .execute();
  return { seqs: rows.map((row) => Number(row.seq)), last: rows.at(-1)?.user_id };
}

/**
 * The organization's users whose keys, kind or rooms changed after directory version `since` (new
 * users among them), each with the rooms it is a member of now, in seq order, at most `limit`: read along the changed_in index, and put in order
 * here (the loader's transaction forbids sorting, and the planner then walked every user by seq).
 */
export async function readChangedUsers(db: Kysely<Database>, orgId: string, since: number, limit: number): Promise<ChangedUser[]> {
  const rows = await db
    .selectFrom('users as u')
    .select(CHANGED_USER_COLUMNS)
    .where('u.org_id', '=', orgId)
    .where('u.changed_in', '>', since)
    // Spelled as the partial index's condition, which the databases must see to use it.
    .where('u.changed_in', '>', sql.lit(0))
    .limit(limit)
    .execute();
  rows.sort((a, b) => Number(a.seq) - Number(b.seq));
  const rooms = await readRoomsOf(
    db,
    orgId,
    rows.map((row) => row.id),
  );
  return rows.map((row) => toChangedUser(row, rooms.get(row.id) ?? []));
}

const CHANGED_USER_COLUMNS = [
  'u.seq',
  'u.id',
  'u.search_key',
  'u.lastname_key',
  'u.firstname_key',
  'u.email_key',
  'u.external',
  'u.needs_invite',
  'u.status',
  'u.firstname',
  'u.lastname',
  'u.email',
] as const;

interface ChangedUserRow {
  seq: number | string;
  id: string;
  search_key: string;
  lastname_key: string;
  firstname_key: string;
  email_key: string;
  external: number;
  needs_invite: number;
  status: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
}

function toChangedUser(row: ChangedUserRow, rooms: readonly string[]): ChangedUser {
  return {
    seq: Number(row.seq),
    id: row.id,
    searchKey: row.search_key,
    sortKeys: { lastname: row.lastname_key, firstname: row.firstname_key, email: row.email_key },
    external: row.external === 1,
    needsInvite: row.needs_invite === 1,
    candidate: isCandidateStatus(row.status),
    rooms,
    shown: { firstname: row.firstname, lastname: row.lastname, email: row.email },
  };
}

/**
 * What changed in an organization after a version: its size then, the users changed, and the rooms
 * whose members were replaced or edited; and the organization as a lookup of the rooms asked for
 * reads it, at that version.
 */
export interface OrganizationChanges {
  size: { version: number; users: number };
  changed: ChangedUser[];
  rooms: { replaced: string[]; edited: string[] };
  scope: DirectoryScope;
}

/** A row of readChangesAtOnce: the organization, its tallies (of the organization and the rooms asked for), the rooms asked for that exist, its changed users and rooms. */
type ChangesRow = {
  id: string;
  external_signatories: number;
  version: number | string;
  tallies: (TallyRow & { room_id: string })[];
  scope_rooms: string[];
  changed: (ChangedUserRow & { rooms: string[] })[];
  rooms: RoomChangeRow[];
};

const TALLY_COLUMNS = ['t.room_id', 't.external', 't.needs_invite', 't.candidate', 't.users'] as const;

/** readChangesAtOnce's statement on PostgreSQL, built once (compiled-once.ts): the changed users and rooms as JSON arrays. */
const postgresChangesRows = compiledOnce(
  ['orgId', 'since', 'limit', 'scopeRooms'],
  (_db, { orgId, since, limit, scopeRooms }) => sql<ChangesRow>`
      select o.id, o.external_signatories, o.directory_version as version,
        (select coalesce(json_agg(t), '[]') from (
          select ${sql.join(TALLY_COLUMNS.map((column) => sql.ref(column)))} from user_tallies t
          where t.org_id = o.id and (t.room_id = '' or t.room_id = any(${scopeRooms}::text[]))) t) as tallies,
        array(select r.id from rooms r where r.org_id = o.id and r.id = any(${scopeRooms}::text[])) as scope_rooms,
        (select coalesce(json_agg(c), '[]') from (
          select ${sql.join(CHANGED_USER_COLUMNS.map((column) => sql.ref(column)))},
            array(select m.room_id from room_members m where m.org_id = u.org_id and m.user_id = u.id) as rooms
          from users u where u.org_id = o.id and u.changed_in > ${since} and u.changed_in > 0 limit ${limit}) c) as changed,
        (select coalesce(json_agg(r), '[]') from (
          select id, members_changed_in, members_edited_in from rooms
          where org_id = o.id and (members_changed_in > ${since} or members_edited_in > ${since})) r) as rooms
      from organizations o where o.id = ${orgId}`,
);

/** readChangesAtOnce's statement on SQLite, built once: the changed users and rooms as JSON text (`scopeRooms`: a JSON array). */
const sqliteChangesRows = compiledOnce(
  ['orgId', 'since', 'limit', 'scopeRooms'],
  (_db, { orgId, since, limit, scopeRooms }) => sql<{
    id: string;
    external_signatories: number;
    version: number;
    tallies: string;
    scope_rooms: string;
    changed: string;
    rooms: string;
  }>`
      select o.id, o.external_signatories, o.directory_version as version,
        (select json_group_array(json_object(${sql.join(TALLY_COLUMNS.flatMap((column) => [sql.lit(column.slice(2)), sql.ref(column)]))}))
          from user_tallies t where t.org_id = o.id and (t.room_id = '' or t.room_id in (select value from json_each(${scopeRooms})))) as tallies,
        (select json_group_array(r.id) from rooms r where r.org_id = o.id and r.id in (select value from json_each(${scopeRooms}))) as scope_rooms,
        (select json_group_array(json_object(${sql.join(
          CHANGED_USER_COLUMNS.flatMap((column) => [sql.lit(column.slice(2)), sql.ref(`c.${column.slice(2)}`)]),
        )}, 'rooms', json(c.rooms))) from (
          select ${sql.join(CHANGED_USER_COLUMNS.map((column) => sql.ref(column)))},
            (select json_group_array(m.room_id) from room_members m where m.org_id = u.org_id and m.user_id = u.id) as rooms
          from users u where u.org_id = o.id and u.changed_in > ${since} and u.changed_in > 0 limit ${limit}) c) as changed,
        (select json_group_array(json_object('id', r.id, 'members_changed_in', r.members_changed_in, 'members_edited_in', r.members_edited_in))
          from rooms r where r.org_id = o.id and (r.members_changed_in > ${since} or r.members_edited_in > ${since})) as rooms
      from organizations o where o.id = ${orgId}`,
);

/**
 * What changed in the organization after directory version `since` (at most `limit` users: as
 * findOrganizationSize and readChangedUsers read them, and its rooms' member lists replaced or
 * edited), and its scope for lookups of the rooms `scopeRooms` (as findLookupScope reads it), in
 * one statement, which sees one snapshot without a transaction: under steady writes a server takes
 * every version in, and this is one round trip where the transaction of those reads made seven on
 * PostgreSQL; on SQLite, one statement where the transaction made six, each built by the query
 * builder (together 8% of a lookup server's time beside 200 writes/s). The scope read with it
 * spares the lookups of each version a read of their own (SearchIndexes.scopeAsOf). Undefined for
 * an unknown organization.
 */
export async function readChangesAtOnce(
  db: Kysely<Database>,
  orgId: string,
  since: number,
  limit: number,
  scopeRooms: readonly string[] = [],
): Promise<OrganizationChanges | undefined> {
  let row: ChangesRow | undefined;
  if (dialectOf(db) === 'postgres') {
    // Read by every server after every commit to the organization: named (prepared-statements.ts;
    // PostgreSQL keeps planning it per run, as the generic plan of `changed_in > $n` costs more).
    row = (await preparedStatements(() => postgresChangesRows(db, { orgId, since, limit, scopeRooms })))[0];
  } else {
    const read = (await sqliteChangesRows(db, { orgId, since, limit, scopeRooms: JSON.stringify(scopeRooms) }))[0];
    row =
      read === undefined
        ? undefined
        : {
            ...read,
            tallies: JSON.parse(read.tallies) as ChangesRow['tallies'],
            scope_rooms: JSON.parse(read.scope_rooms) as string[],
            changed: JSON.parse(read.changed) as ChangesRow['changed'],
            rooms: JSON.parse(read.rooms) as RoomChangeRow[],
          };
  }
  if (row === undefined) return undefined;
  const changed = row.changed.sort((a, b) => Number(a.seq) - Number(b.seq)).map((user) => toChangedUser(user, user.rooms));
  const tallies = row.tallies.filter((tally) => tally.room_id === '').map(toTally);
  const rooms = new Map(row.scope_rooms.map((roomId) => [roomId, [] as Tally[]]));
  for (const tally of row.tallies) if (tally.room_id !== '') rooms.get(tally.room_id)?.push(toTally(tally));
  return {
    size: { version: Number(row.version), users: tallies.reduce((sum, tally) => sum + tally.users, 0) },
    changed,
    rooms: roomChanges(row.rooms, since),
    scope: { organization: toOrganizationRow({ ...row, directory_version: row.version }, tallies), tallies, rooms, asked: new Set(scopeRooms) },
  };
}

/** The rooms each of these users is a member of (along the index of a user's rooms). */
async function readRoomsOf(db: Kysely<Database>, orgId: string, userIds: readonly string[]): Promise<Map<string, string[]>> {
  const rooms = new Map<string, string[]>();
  for (const batch of chunks(userIds, 500)) {
    const rows = await db.selectFrom('room_members').select(['user_id', 'room_id']).where('org_id', '=', orgId).where('user_id', 'in', batch).execute();
    for (const row of rows) rooms.set(row.user_id, [...(rooms.get(row.user_id) ?? []), row.room_id]);
  }
  return rooms;
}

interface RoomChangeRow {
  id: string;
  members_changed_in?: number | string | null | undefined;
  members_edited_in?: number | string | null | undefined;
}

function roomChanges(rows: readonly RoomChangeRow[], since: number): { replaced: string[]; edited: string[] } {
  return {
    replaced: rows.filter((row) => Number(row.members_changed_in) > since).map((row) => row.id),
    edited: rows.filter((row) => Number(row.members_edited_in) > since && !(Number(row.members_changed_in) > since)).map((row) => row.id),
  };
}
