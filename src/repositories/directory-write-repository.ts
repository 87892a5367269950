import { CompiledQuery, sql, type RawBuilder, type Transaction } from 'kysely';
import { dialectOf, type DialectName } from '../db/dialect.ts';
import { lastStatement } from '../db/pipelined-transactions.ts';
import type { Database, RoomMemberTable, RoomTable, UserTable } from '../db/tables.ts';
import { AUDIT_EVENTS_PER_STATEMENT, insertAuditEvents, type AuditEventRow } from './audit-repository.ts';
import { addToOrganizationTally, moveInRoomTally, tallyStatement, type TallyKind, type TallyMove } from './user-tally-repository.ts';

/**
 * The SQL of directory writes: users, rooms, members and organizations' versions, as the one
 * directory writer (src/directory/directory-writer.ts) and the bulk import issue them.
 */

/** An organization as an import or the API writes it; `externalSignatories` undefined: the stored setting stays (false for a new one). */
export interface OrganizationUpsert {
  id: string;
  name: string;
  externalSignatories: boolean | undefined;
}

/**
 * Upserts organizations, two statements at most (with the setting given, and without), bumping
 * the directory version of those that exist; their directory versions after.
 */
export async function upsertOrganizationRows(
  trx: Transaction<Database>,
  organizations: readonly OrganizationUpsert[],
  at: string,
): Promise<{ id: string; directory_version: number }[]> {
  const versions: { id: string; directory_version: number }[] = [];
  for (const settingGiven of [true, false]) {
    const rows = organizations.filter((organization) => (organization.externalSignatories !== undefined) === settingGiven);
    if (rows.length === 0) continue;
    await trx
      .insertInto('organizations')
      .values(
        rows.map((organization) => ({
          id: organization.id,
          name: organization.name,
          external_signatories: organization.externalSignatories === true ? 1 : 0,
          created_at: at,
          updated_at: at,
        })),
      )
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          name: eb.ref('excluded.name'),
          // Left out: the stored setting stays.
          external_signatories: settingGiven ? eb.ref('excluded.external_signatories') : eb.ref('organizations.external_signatories'),
          directory_version: eb(eb.ref('organizations.directory_version'), '+', 1),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .returning(['id', 'directory_version'])
      .execute()
      .then((rows) => versions.push(...rows.map((row) => ({ id: row.id, directory_version: Number(row.directory_version) }))));
  }
  return versions;
}

/**
 * Lists each directory version made with the writing transaction's random stamp (see the
 * directory-states migration), keeping only the last LISTED_STATES of each organization.
 */
export async function listDirectoryVersions(
  trx: Transaction<Database>,
  versions: readonly { id: string; directory_version: number }[],
  stamp: string,
): Promise<void> {
  if (versions.length === 0) return;
  await trx
    .insertInto('directory_states')
    .values(versions.map((row) => ({ org_id: row.id, version: row.directory_version, stamp })))
    .onConflict((oc) => oc.columns(['org_id', 'version']).doUpdateSet((eb) => ({ stamp: eb.ref('excluded.stamp') })))
    .execute();
  await sql`delete from directory_states where org_id in (${sql.join(versions.map((row) => row.id))})
    and version <= (select o.directory_version from organizations o where o.id = directory_states.org_id) - ${LISTED_STATES}`.execute(trx);
}

/**
 * Bumps one organization's directory version for a single change and lists it with `stamp` (as
 * listDirectoryVersions does); the new version, or undefined for an unknown organization. The
 * bump takes the organization's row lock on PostgreSQL, held to the commit: writers of one
 * organization wait for each other from here. On PostgreSQL one statement (the three as
 * data-modifying CTEs): a round trip there costs 0.3–0.5 ms under load, and every one made while
 * the lock is held lengthens the queue of writers behind it. SQLite, in process, runs the three.
 */
export async function bumpDirectoryVersion(trx: Transaction<Database>, orgId: string, stamp: string): Promise<number | undefined> {
  if (dialectOf(trx) === 'postgres') {
    // The delete sees the listing before the insert (one snapshot): it removes only old versions.
    // Only those that fell out of the list lately: every version older was removed by the bumps
    // since (or by an import's listing, which removes them all), and its dead index entries stay
    // until a vacuum, so a range open below walks more of them with every write (thousands after
    // a few thousand writes with autovacuum off or behind: 0.6 ms → 1.9 ms per bump).
    const { rows } = await sql<{ directory_version: string | number }>`
      with bumped as (
        update organizations set directory_version = directory_version + 1 where id = ${orgId} returning directory_version
      ), listed as (
        insert into directory_states (org_id, version, stamp) select ${orgId}, directory_version, ${stamp} from bumped
        on conflict (org_id, version) do update set stamp = excluded.stamp
      ), pruned as (
        delete from directory_states where org_id = ${orgId}
          and version <= (select directory_version from bumped) - ${LISTED_STATES}
          and version > (select directory_version from bumped) - ${2 * LISTED_STATES}
      )
      select directory_version from bumped`.execute(trx);
    return rows[0] === undefined ? undefined : Number(rows[0].directory_version);
  }
  const bumped = await trx
    .updateTable('organizations')
    .set((eb) => ({ directory_version: eb(eb.ref('directory_version'), '+', 1) }))
    .where('id', '=', orgId)
    .returning('directory_version')
    .executeTakeFirst();
  if (bumped === undefined) return undefined;
  const version = Number(bumped.directory_version);
  await listDirectoryVersions(trx, [{ id: orgId, directory_version: version }], stamp);
  return version;
}

/**
 * Directory versions listed per organization: a server whose copy of an index is older (stopped
 * across more imports of its organization than this) reads the index whole at its next start.
 */
export const LISTED_STATES = 16;

/**
 * Creates rooms (their member lists new as of the rows' `members_changed_in`), or renames those
 * that exist (by organization and id), marking their member lists replaced too if `membersReplaced`.
 */
export async function upsertRoomRows(trx: Transaction<Database>, rows: readonly RoomTable[], membersReplaced: boolean): Promise<void> {
  await trx
    .insertInto('rooms')
    .values([...rows])
    .onConflict((oc) =>
      oc
        .columns(['org_id', 'id'])
        .doUpdateSet((eb) =>
          membersReplaced
            ? { name: eb.ref('excluded.name'), updated_at: eb.ref('excluded.updated_at'), members_changed_in: eb.ref('excluded.members_changed_in') }
            : { name: eb.ref('excluded.name'), updated_at: eb.ref('excluded.updated_at') },
        ),
    )
    .execute();
}

/** A user as the import writes it: every column but the generated `seq` and those only SCIM sets. */
export type UserRow = Omit<UserTable, 'seq' | 'user_name' | 'user_name_lower' | 'external_id'>;

const USER_COLUMNS = [
  'org_id',
  'id',
  'firstname',
  'lastname',
  'email',
  'email_lower',
  'external',
  'status',
  'needs_invite',
  'firstname_key',
  'lastname_key',
  'email_key',
  'search_key',
  'changed_in',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof UserRow)[];

/** What an upsert of a user who exists replaces: all but its key and when it was created. */
const REPLACED_COLUMNS = USER_COLUMNS.filter((column) => column !== 'org_id' && column !== 'id' && column !== 'created_at');

/**
 * What a lookup shows or tests of a user (the in-memory index holds the keys and kind; an answer
 * carried across versions needs the names too): a re-import that leaves these as they are leaves
 * `changed_in` too.
 */
const INDEXED_COLUMNS = [
  'search_key',
  'firstname_key',
  'lastname_key',
  'email_key',
  'external',
  'needs_invite',
  'status',
  'firstname',
  'lastname',
  'email',
] as const satisfies readonly (keyof UserRow)[];

/** `changed_in` of an upsert: the new version only if something the index holds differs (the stored one otherwise). */
const changedIn = sql`case when ${sql.join(
  INDEXED_COLUMNS.map((column) => sql`users.${sql.id(column)} is not distinct from excluded.${sql.id(column)}`),
  sql` and `,
)} then users.changed_in else excluded.changed_in end`;

/** Rows per insert statement: SQLite binds every value (at most 32,766); PostgreSQL takes one array per column. */
export function insertBatch(dialect: DialectName): number {
  return dialect === 'postgres' ? 10_000 : 500;
}

/**
 * Builds the statement that inserts users, or replaces every column of those
 * that exist (by organization and id), and returns what runs it: a loader can
 * build the next batch while the database writes this one. `insertOnly` is for
 * an organization without stored users, whose unique keys may be dropped.
 */
export function prepareUserUpsert(trx: Transaction<Database>, rows: readonly UserRow[], options: { insertOnly: boolean }): () => Promise<unknown> {
  if (dialectOf(trx) === 'postgres') {
    const insert = unnestInsert('users', USER_COLUMNS, rows);
    const statement = options.insertOnly
      ? insert
      : sql`${insert} on conflict (org_id, id) do update set ${sql.join(REPLACED_COLUMNS.map((column) => sql`${sql.id(column)} = ${column === 'changed_in' ? changedIn : sql`excluded.${sql.id(column)}`}`))}`;
    return () => statement.execute(trx);
  }
  const text = sqliteUserUpsertSql(trx, rows.length, options.insertOnly);
  const parameters: unknown[] = [];
  for (const row of rows) for (const column of USER_COLUMNS) parameters.push(row[column]);
  return () => trx.executeQuery(CompiledQuery.raw(text, parameters));
}

/** The SQLite upsert's text, by `${rows}:${insertOnly}`: only full batches are kept, the rest are compiled each time. */
const sqliteUserUpserts = new Map<string, string>();

/**
 * The text of SQLite's upsert of `rows` users, their values bound in USER_COLUMNS order, row after
 * row. Compiled once per batch size: the query builder took about 4 s of a million-user import
 * (6% of it) to turn each batch's 8,000 values into parameters (docs/benchmarks.md).
 */
function sqliteUserUpsertSql(trx: Transaction<Database>, rows: number, insertOnly: boolean): string {
  const key = `${rows}:${insertOnly}`;
  const kept = sqliteUserUpserts.get(key);
  if (kept !== undefined) return kept;
  const placeholder = Object.fromEntries(USER_COLUMNS.map((column) => [column, null])) as unknown as UserRow;
  const insert = trx.insertInto('users').values(Array.from({ length: rows }, () => placeholder));
  const statement = insertOnly
    ? insert
    : insert.onConflict((oc) =>
        oc
          .columns(['org_id', 'id'])
          .doUpdateSet(Object.fromEntries(REPLACED_COLUMNS.map((column) => [column, column === 'changed_in' ? changedIn : sql.ref(`excluded.${column}`)]))),
      );
  const text = statement.compile().sql;
  if (rows === insertBatch('sqlite')) sqliteUserUpserts.set(key, text);
  return text;
}

/** Inserts room members. */
export async function insertMemberRows(trx: Transaction<Database>, rows: readonly RoomMemberTable[]): Promise<void> {
  if (dialectOf(trx) === 'postgres') await unnestInsert('room_members', ['org_id', 'room_id', 'user_id'], rows).execute(trx);
  else
    await trx
      .insertInto('room_members')
      .values([...rows])
      .execute();
}

/** One member coming into a room or leaving it, as a directory change of `version` makes it. */
export interface MembershipChange {
  orgId: string;
  roomId: string;
  userId: string;
  /** The user's kind, as the room's tally counts it. */
  kind: TallyKind;
  version: number;
  /** When the change is made: the room's `updated_at` (its member count is part of it). */
  at: string;
}

/**
 * Adds the member (`add`) or removes it: its room's tally moves, the room is marked as having its
 * members edited and the user as changed in `version` (what the search indexes read to take it
 * in). False, and nothing written, when it was a member already (or was not one). On PostgreSQL
 * one statement: a member change waits for no other round trip while the organization's writers
 * wait for it.
 */
export async function changeMembership(trx: Transaction<Database>, change: MembershipChange, add: boolean): Promise<boolean> {
  const { orgId, roomId, userId, version, at } = change;
  const delta = add ? 1 : -1;
  const membership = add
    ? sql`insert into room_members (org_id, room_id, user_id) values (${orgId}, ${roomId}, ${userId}) on conflict do nothing returning org_id, room_id`
    : sql`delete from room_members where org_id = ${orgId} and room_id = ${roomId} and user_id = ${userId} returning org_id, room_id`;
  if (dialectOf(trx) === 'postgres') {
    const marks = membersEditedStatements(trx, orgId, [roomId], version, at, userId, sql<boolean>`exists (select 1 from changed)`);
    const { rows } = await sql<{ changed: number }>`
      with changed as (${membership}),
      tallied as (${tallyStatement(sql`select org_id, room_id from changed`, [{ kind: change.kind, delta }])}),
      ${sql.join(marks.map((statement, k) => sql`${sql.id(`marked${k}`)} as (${statement})`))}
      select count(*)::integer as changed from changed`.execute(trx);
    return rows[0]!.changed > 0;
  }
  const { rows } = await membership.execute(trx);
  if (rows.length === 0) return false;
  await moveInRoomTally(trx, orgId, roomId, change.kind, delta);
  await markMembersEdited(trx, orgId, [roomId], version, at, userId);
  return true;
}

/**
 * Marks one user's membership of these rooms changed in `version`, for the search indexes: the
 * rooms as edited (and updated `at`: a room's member count, a group's members are part of it), the
 * user (if given) as changed, so an index holding a room's members lays the
 * user's memberships over them (instead of reading the room's members again).
 */
export async function markMembersEdited(
  trx: Transaction<Database>,
  orgId: string,
  roomIds: readonly string[],
  version: number,
  at: string,
  userId?: string,
): Promise<void> {
  if (roomIds.length === 0) return;
  for (const statement of membersEditedStatements(trx, orgId, roomIds, version, at, userId)) await statement.execute();
}

/** The statements of markMembersEdited, each only where `onlyIf` holds when given (as a part of a PostgreSQL WITH). */
function membersEditedStatements(
  trx: Transaction<Database>,
  orgId: string,
  roomIds: readonly string[],
  version: number,
  at: string,
  userId?: string,
  onlyIf?: RawBuilder<boolean>,
) {
  const rooms = trx
    .updateTable('rooms')
    .set((eb) => ({ members_edited_in: version, member_edits: eb(eb.ref('member_edits'), '+', 1), updated_at: at }))
    .where('org_id', '=', orgId)
    .where('id', 'in', [...roomIds])
    .$if(onlyIf !== undefined, (update) => update.where(onlyIf!));
  if (userId === undefined) return [rooms];
  return [
    rooms,
    trx
      .updateTable('users')
      .set({ changed_in: version })
      .where('org_id', '=', orgId)
      .where('id', '=', userId)
      .$if(onlyIf !== undefined, (update) => update.where(onlyIf!)),
  ];
}

/**
 * `insert into TABLE (columns) select * from unnest(one array per column)`:
 * PostgreSQL takes each array as one parameter, where it parses a multi-row
 * VALUES list value by value. Integer columns are the 0/1 flags and `changed_in`.
 */
function unnestInsert<Row>(table: string, columns: readonly (keyof Row & string)[], rows: readonly Row[]): RawBuilder<unknown> {
  const arrays = columns.map((column) => {
    const type = column === 'external' || column === 'needs_invite' || column === 'changed_in' ? 'integer' : 'text';
    const values = rows.map((row) => row[column] as string | number | null);
    return sql`${type === 'integer' ? binaryIntegerArray(values as (number | null)[]) : binaryTextArray(values as (string | null)[])}::${sql.raw(type)}[]`;
  });
  return sql`insert into ${sql.table(table)} (${sql.join(columns.map((column) => sql.id(column)))}) select * from unnest(${sql.join(arrays)})`;
}

/** PostgreSQL's type ids of the array elements written here. */
const TEXT_OID = 25;
const INT4_OID = 23;
/** Bytes before the elements: dimensions, has-nulls flag, element type, length and lower bound of the one dimension. */
const ARRAY_HEADER_BYTES = 20;

/**
 * A one-dimensional array in PostgreSQL's binary format, which the driver
 * sends as it is (a Buffer parameter is binary). Built here rather than as
 * a text literal (`{"a","b",NULL}`), which the driver would encode and the
 * database parse element by element.
 */
function binaryArray(elementOid: number, count: number, maxBytes: number, write: (buffer: Buffer, at: number, index: number) => number): Buffer {
  const buffer = Buffer.allocUnsafe(ARRAY_HEADER_BYTES + maxBytes);
  if (count === 0) {
    // No dimension at all: PostgreSQL's empty array.
    buffer.writeInt32BE(0, 0);
    buffer.writeInt32BE(0, 4);
    buffer.writeInt32BE(elementOid, 8);
    return buffer.subarray(0, 12);
  }
  buffer.writeInt32BE(1, 0);
  buffer.writeInt32BE(1, 4); // may hold nulls
  buffer.writeInt32BE(elementOid, 8);
  buffer.writeInt32BE(count, 12);
  buffer.writeInt32BE(1, 16);
  let at = ARRAY_HEADER_BYTES;
  for (let index = 0; index < count; index++) at = write(buffer, at, index);
  return buffer.subarray(0, at);
}

/** Each element: its length in bytes (-1: null), then its UTF-8 bytes (at most 3 per UTF-16 unit). */
function binaryTextArray(values: readonly (string | null)[]): Buffer {
  let maxBytes = 0;
  for (const value of values) maxBytes += 4 + (value === null ? 0 : value.length * 3);
  return binaryArray(TEXT_OID, values.length, maxBytes, (buffer, at, index) => {
    const value = values[index]!;
    if (value === null) return buffer.writeInt32BE(-1, at);
    const written = buffer.write(value, at + 4);
    buffer.writeInt32BE(written, at);
    return at + 4 + written;
  });
}

function binaryIntegerArray(values: readonly (number | null)[]): Buffer {
  return binaryArray(INT4_OID, values.length, values.length * 8, (buffer, at, index) => {
    const value = values[index]!;
    if (value === null) return buffer.writeInt32BE(-1, at);
    buffer.writeInt32BE(4, at);
    return buffer.writeInt32BE(value, at + 4);
  });
}

/**
 * The last statements of a batch of changes: what they add to the organization's own tally, and
 * their audit events. On PostgreSQL one statement (the tally a WITH of the events' insert), the
 * transaction's last, with its COMMIT sent right behind it (pipelined-transactions.ts): the
 * organization's other writers wait for this batch's every round trip.
 */
export async function recordBatch(trx: Transaction<Database>, orgId: string, moves: readonly TallyMove[], events: readonly AuditEventRow[]): Promise<void> {
  if (dialectOf(trx) === 'postgres' && events.length > 0 && events.length <= AUDIT_EVENTS_PER_STATEMENT) {
    const insert = trx.insertInto('audit_events').values(events);
    const tally = moves.length > 0 ? tallyStatement(sql`select ${orgId} as org_id, '' as room_id`, moves) : undefined;
    await lastStatement<unknown>(() => (tally === undefined ? insert.execute() : sql`with tallied as (${tally}) ${insert}`.execute(trx)));
    return;
  }
  await addToOrganizationTally(trx, orgId, moves);
  await insertAuditEvents(trx, events);
}
