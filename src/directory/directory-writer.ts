import { randomUUID } from 'node:crypto';
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { Database, RoomTable, UserTable } from '../db/tables.ts';
import { isCandidateStatus } from '../domain/signatory-rules.ts';
import { ProblemError } from '../errors.ts';
import { preparedStatements } from '../db/prepared-statements.ts';
import { dialectOf } from '../db/dialect.ts';
import { isOutcomeUnknown, pipelinedTransaction, withReadsAhead } from '../db/pipelined-transactions.ts';
import { insertAuditEvents, type AuditEventRow } from '../repositories/audit-repository.ts';
import { auditEvent, type Actor, type AuditAction } from './audit.ts';
import {
  findHolders,
  findRoomAndUser,
  findUser,
  findUserRow,
  lockRoom,
  roomHasDocuments,
  usersAndRoomsByIds,
  type UserRecord,
} from '../repositories/directory-repository.ts';
import {
  bumpDirectoryVersion,
  changeMembership,
  listDirectoryVersions,
  markMembersEdited,
  recordBatch,
  type MembershipChange,
} from '../repositories/directory-write-repository.ts';
import { moveInTallies, sameKind, withTallyMove, type TallyKind, type TallyMove } from '../repositories/user-tally-repository.ts';
import type { UserFields } from '../domain/directory-entities.ts';
import { userRow } from './directory-rows.ts';

/**
 * The one directory writer: every change to an organization's users, rooms, members and settings,
 * from the REST API, SCIM and the CLI, goes through a DirectoryChange, which keeps the rules a
 * change must obey in one place:
 * - the organization's directory version is bumped once per transaction (the first statement,
 *   which also makes writers of one organization wait for each other), and listed with a random
 *   stamp (see the directory-states migration);
 * - users are stored with their folded keys, computed in code (directory-rows.ts), and
 *   `changed_in` marks the users whose keys, kind or rooms changed, `members_edited_in` the rooms
 *   one of whose members came or went, which is what the in-memory search indexes read to take a
 *   change in (src/search-index/; an import replacing a member list marks `members_changed_in`);
 * - the tallies that count users by kind move with each user and member;
 * - one audit event per change, in the same transaction (contract section 10).
 * The bulk import (bulk-import.ts) writes whole files with the same row rules and repositories.
 */

/** A user's fields as the API writes them: the directory's own, and SCIM's. */
export interface UserWrite extends UserFields {
  userName: string | null;
  externalId: string | null;
}

/** Adds `delta` users of `kind` to `moves` (one move per kind). */
function addMove(moves: TallyMove[], kind: TallyKind, delta: number): void {
  const move = moves.find((counted) => sameKind(counted.kind, kind));
  if (move === undefined) moves.push({ kind, delta });
  else move.delta += delta;
}

function kindOf(row: { external: number; needs_invite: number; status: string }): TallyKind {
  return { external: row.external, needs_invite: row.needs_invite, candidate: isCandidateStatus(row.status) ? 1 : 0 };
}

/** What the writer read for a change with its batch's first statement (see ChangeAbout): each used once, by the change's first read of it. */
interface ReadForChange {
  /** The user's row (undefined: none, or deleted), if it was read. */
  user?: { id: string; row: UserRecord | undefined };
  /** Whether the room exists, if it was read. */
  room?: { id: string; exists: boolean };
}

/** The changes of one transaction to one organization's directory. */
export class DirectoryChange {
  readonly trx: Transaction<Database>;
  readonly orgId: string;
  /** The directory version this change makes. */
  readonly version: number;
  /** When it happens: what it creates or changes is stamped with it. */
  readonly at: string;
  readonly #actor: Actor;
  readonly #events: AuditEventRow[] = [];
  readonly #organizationTally: TallyMove[] = [];
  #readAhead: ReadForChange;
  /** What the change said it touches (ChangeAbout), held to by its writes. */
  readonly #about: ChangeAbout | undefined;

  constructor(
    trx: Transaction<Database>,
    orgId: string,
    version: number,
    at: string,
    actor: Actor,
    readAhead: ReadForChange = {},
    about: ChangeAbout | undefined = undefined,
  ) {
    this.trx = trx;
    this.orgId = orgId;
    this.version = version;
    this.at = at;
    this.#actor = actor;
    this.#readAhead = readAhead;
    this.#about = about;
  }

  /** Refuses a write outside what the change said it touches: a later change of its batch may have read ahead what it would change. */
  #holdsTo(write: { userId: string } | 'rooms'): void {
    const about = this.#about;
    if (about === undefined || (write !== 'rooms' && write.userId === about.userId)) return;
    throw new Error(
      `a change said it writes user "${about.userId}" only, and no room's existence; it tried to write ${write === 'rooms' ? 'a room' : `user "${write.userId}"`}`,
    );
  }

  /** The user with this id (not deleted), or undefined: as the writer read it ahead for this change (see ChangeAbout), else read now. */
  async findUser(userId: string): Promise<UserRecord | undefined> {
    const { user, ...rest } = this.#readAhead;
    if (user?.id !== userId) return findUser(this.trx, this.orgId, userId);
    this.#readAhead = rest;
    return user.row;
  }

  /** Whether the room exists, and the user with this id (not deleted) if there is one: as read ahead for this change, else read now. */
  async findRoomAndUser(roomId: string, userId: string): Promise<{ roomExists: boolean; user: UserRecord | undefined }> {
    const { user, room } = this.#readAhead;
    if (user?.id !== userId || room?.id !== roomId) return findRoomAndUser(this.trx, this.orgId, roomId, userId);
    this.#readAhead = {};
    return { roomExists: room.exists, user: user.row };
  }

  /** The audit events this change has recorded, written with its transaction's last statement: none means it changed nothing. */
  get events(): readonly AuditEventRow[] {
    return this.#events;
  }

  /** What this change adds to the organization's own tally (not its rooms'), written with its transaction's last statements. */
  get organizationTally(): readonly TallyMove[] {
    return this.#organizationTally;
  }

  #countInOrganization(kind: TallyKind, delta: number): void {
    addMove(this.#organizationTally, kind, delta);
  }

  /** Records the audit event of a change made here. */
  audit(action: AuditAction, target: { type: string; id: string }, details: object = {}): void {
    this.#events.push(auditEvent(this.orgId, this.#actor, this.at, action, target, details));
  }

  /** 409 unless the email, and the userName the user reads as (its email while it has none), are free in the organization (but for `userId`'s own). */
  async #assertUnique(user: UserWrite, userId: string, holders?: { emailOwner: string | undefined; userNameOwner: string | undefined }): Promise<void> {
    const userName = user.userName ?? user.email;
    const { emailOwner, userNameOwner } =
      holders ?? (await findHolders(this.trx, this.orgId, { emailLower: user.email.toLowerCase(), userNameLower: userName.toLowerCase() }));
    if (emailOwner !== undefined && emailOwner !== userId) {
      throw new ProblemError('email-taken', `The email "${user.email}" already belongs to another user of organization "${this.orgId}".`);
    }
    if (userNameOwner !== undefined && userNameOwner !== userId) {
      throw new ProblemError('user-name-taken', `The userName "${userName}" already belongs to another user of organization "${this.orgId}".`);
    }
  }

  /** Creates a user (409 `user-exists` when the id is taken); a deleted user's id is taken again, as a new user. */
  async createUser(user: UserWrite): Promise<UserRecord> {
    this.#holdsTo({ userId: user.id });
    const row = { ...userRow(this.orgId, user, this.version, this.at), ...scimColumns(user) };
    // Most creates take an id, email and userName nobody holds: inserted at once, the unique
    // indexes of the three (the rules of #assertUnique) the check, one statement instead of two.
    const inserted = await this.trx
      .insertInto('users')
      .values(row)
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    const created = inserted ?? (await this.#createOverHeldKey(user, row));
    // A new user (or a deleted one's id taken again) is a member of no room: only the organization's tally moves.
    this.#countInOrganization(kindOf(row), 1);
    this.audit('user.created', { type: 'user', id: user.id });
    return created;
  }

  /** createUser's way when one of the user's keys is held: which one says the answer, unless it is a deleted user's id, taken again. */
  async #createOverHeldKey(user: UserWrite, row: Insertable<UserTable>): Promise<UserRecord> {
    const holders = await findHolders(this.trx, this.orgId, {
      id: user.id,
      emailLower: user.email.toLowerCase(),
      userNameLower: (user.userName ?? user.email).toLowerCase(),
    });
    if (holders.idStatus !== undefined && holders.idStatus !== 'deleted') {
      throw new ProblemError('user-exists', `A user with id "${user.id}" already exists in organization "${this.orgId}".`);
    }
    await this.#assertUnique(user, user.id, holders);
    const stored = holders.idStatus === undefined ? undefined : await findUserRow(this.trx, this.orgId, user.id);
    if (stored === undefined) return this.trx.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
    this.#countInOrganization(kindOf(stored), -1);
    return this.trx.updateTable('users').set(row).where('org_id', '=', this.orgId).where('id', '=', user.id).returningAll().executeTakeFirstOrThrow();
  }

  /** Replaces a stored user's fields; `changed_in` moves only if what a lookup shows or tests of it changed. */
  async updateUser(existing: UserRecord, user: UserWrite, details: object = {}): Promise<UserRecord> {
    this.#holdsTo({ userId: existing.id });
    // Unchanged keys (ignoring case) were unique before and stay so.
    const keysChanged =
      user.email.toLowerCase() !== existing.email_lower || (user.userName ?? user.email).toLowerCase() !== (existing.user_name_lower ?? existing.email_lower);
    if (keysChanged) await this.#assertUnique(user, existing.id);
    const next = userRow(this.orgId, { ...user, id: existing.id }, this.version, this.at);
    // What a lookup shows or tests: the in-memory index lays the user over what it holds, and an
    // answer cached before is carried across this version only if the user cannot be in it.
    const indexedSame =
      next.firstname === existing.firstname &&
      next.lastname === existing.lastname &&
      next.email === existing.email &&
      next.search_key === existing.search_key &&
      next.firstname_key === existing.firstname_key &&
      next.lastname_key === existing.lastname_key &&
      next.email_key === existing.email_key &&
      next.external === existing.external &&
      next.needs_invite === existing.needs_invite &&
      next.status === existing.status;
    const { org_id: _org, id: _id, created_at: _created, ...columns } = next;
    const update = this.trx
      .updateTable('users')
      .set({ ...columns, ...scimColumns(user), changed_in: indexedSame ? existing.changed_in : this.version })
      .where('org_id', '=', this.orgId)
      .where('id', '=', existing.id)
      .returningAll();
    const updated = await withTallyMove(this.trx, this.orgId, existing.id, kindOf(existing), kindOf(next), update);
    this.audit('user.updated', { type: 'user', id: existing.id }, details);
    return updated;
  }

  /**
   * Deletes a user: out of every room, and its row emptied of personal data but kept as `deleted`
   * (in-memory search indexes pass over it as a change; its id may be taken again).
   */
  async deleteUser(existing: UserRecord): Promise<void> {
    this.#holdsTo({ userId: existing.id });
    await moveInTallies(this.trx, this.orgId, existing.id, kindOf(existing), undefined);
    const rooms = await this.trx.selectFrom('room_members').select('room_id').where('org_id', '=', this.orgId).where('user_id', '=', existing.id).execute();
    await this.trx.deleteFrom('room_members').where('org_id', '=', this.orgId).where('user_id', '=', existing.id).execute();
    await markMembersEdited(
      this.trx,
      this.orgId,
      rooms.map((room) => room.room_id),
      this.version,
      this.at,
    );
    const gone = userRow(this.orgId, { id: existing.id, firstname: null, lastname: null, email: '', external: false, status: 'active' }, this.version, this.at);
    await this.trx
      .updateTable('users')
      .set({
        firstname: null,
        lastname: null,
        email: '',
        // No email has a space: a deleted user's never collides.
        email_lower: sql<string>`' deleted:' || seq`,
        external: 0,
        needs_invite: 0,
        status: 'deleted',
        firstname_key: gone.firstname_key,
        lastname_key: gone.lastname_key,
        email_key: gone.email_key,
        search_key: gone.search_key,
        user_name: null,
        user_name_lower: null,
        external_id: null,
        changed_in: this.version,
        updated_at: this.at,
      })
      .where('org_id', '=', this.orgId)
      .where('id', '=', existing.id)
      .execute();
    await moveInTallies(this.trx, this.orgId, existing.id, undefined, { external: 0, needs_invite: 0, candidate: 0 });
    this.audit('user.deleted', { type: 'user', id: existing.id });
  }

  /** Creates a room (409 `room-exists` when the id is taken). */
  async createRoom(room: { id: string; name: string; externalId?: string | null }): Promise<void> {
    this.#holdsTo('rooms');
    const taken = await this.trx.selectFrom('rooms').select('id').where('org_id', '=', this.orgId).where('id', '=', room.id).executeTakeFirst();
    if (taken !== undefined) throw new ProblemError('room-exists', `A signing room with id "${room.id}" already exists in organization "${this.orgId}".`);
    const row: RoomTable = {
      org_id: this.orgId,
      id: room.id,
      name: room.name,
      created_at: this.at,
      updated_at: this.at,
      members_changed_in: this.version,
      external_id: room.externalId ?? null,
    };
    await this.trx.insertInto('rooms').values(row).execute();
    this.audit('room.created', { type: 'room', id: room.id });
  }

  /** Renames a room (and sets the id its SCIM group has at the identity provider, if given). */
  async updateRoom(roomId: string, name: string, details: object = {}, externalId?: string | null): Promise<void> {
    await this.trx
      .updateTable('rooms')
      .set({ name, updated_at: this.at, ...(externalId !== undefined ? { external_id: externalId } : {}) })
      .where('org_id', '=', this.orgId)
      .where('id', '=', roomId)
      .execute();
    this.audit('room.updated', { type: 'room', id: roomId }, details);
  }

  /** Deletes a room and its member list; 409 `room-has-documents` while it holds documents. */
  async deleteRoom(roomId: string): Promise<void> {
    this.#holdsTo('rooms');
    // An upload committing meanwhile would otherwise slip its document past the check.
    await lockRoom(this.trx, this.orgId, roomId);
    if (await roomHasDocuments(this.trx, this.orgId, roomId)) {
      throw new ProblemError('room-has-documents', `Signing room "${roomId}" holds documents: delete them first (they are evidence).`);
    }
    await this.trx.deleteFrom('room_members').where('org_id', '=', this.orgId).where('room_id', '=', roomId).execute();
    await this.trx.deleteFrom('user_tallies').where('org_id', '=', this.orgId).where('room_id', '=', roomId).execute();
    await this.trx.deleteFrom('idempotency_keys').where('org_id', '=', this.orgId).where('room_id', '=', roomId).execute();
    await this.trx.deleteFrom('rooms').where('org_id', '=', this.orgId).where('id', '=', roomId).execute();
    this.audit('room.deleted', { type: 'room', id: roomId });
  }

  /** Adds a user to a room; false (and nothing recorded) when it is a member already. */
  async addMember(roomId: string, user: UserRecord): Promise<boolean> {
    this.#holdsTo({ userId: user.id });
    if (!(await changeMembership(this.trx, this.#membership(roomId, user), true))) return false;
    this.audit('room.member.added', { type: 'room', id: roomId }, { userId: user.id });
    return true;
  }

  /** Removes a user from a room; false (and nothing recorded) when it is not a member. */
  async removeMember(roomId: string, user: UserRecord): Promise<boolean> {
    this.#holdsTo({ userId: user.id });
    if (!(await changeMembership(this.trx, this.#membership(roomId, user), false))) return false;
    this.audit('room.member.removed', { type: 'room', id: roomId }, { userId: user.id });
    return true;
  }

  /** Changes the organization's name and setting. */
  async updateOrganization(organization: { name: string; externalSignatories: boolean }, details: object = {}): Promise<void> {
    await this.trx
      .updateTable('organizations')
      .set({ name: organization.name, external_signatories: organization.externalSignatories ? 1 : 0, updated_at: this.at })
      .where('id', '=', this.orgId)
      .execute();
    this.audit('organization.updated', { type: 'organization', id: this.orgId }, details);
  }

  #membership(roomId: string, user: UserRecord): MembershipChange {
    return { orgId: this.orgId, roomId, userId: user.id, kind: kindOf(user), version: this.version, at: this.at };
  }
}

function scimColumns(user: UserWrite) {
  return { user_name: user.userName, user_name_lower: user.userName?.toLowerCase() ?? null, external_id: user.externalId };
}

/**
 * Runs `work` as one change to the organization's directory, in one transaction with the changes
 * to the same organization that wait meanwhile (group commit): the version is bumped first (404
 * `organization-not-found` for an unknown organization), the events of every change written last,
 * and each change sees those before it. Anything `work` throws rolls its change back, the version
 * and the events included: a batch in which a change fails is rolled back whole and run again
 * with that change alone (those before it together, those after it with the next batch), in
 * order. A transaction that records no event changed nothing and is rolled back too (no version
 * spent, no cache emptied); its changes still answer with what they read. Answers are given once
 * the transaction has committed or rolled back. `work` must not itself ask for a change of the
 * same organization: it would wait for its own batch.
 */
export function changeDirectory<T>(
  db: Kysely<Database>,
  orgId: string,
  actor: Actor,
  work: (change: DirectoryChange) => Promise<T>,
  about?: ChangeAbout,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let writes = organizationWrites.get(db);
    if (writes === undefined) organizationWrites.set(db, (writes = new Map()));
    let waiting = writes.get(orgId);
    if (waiting === undefined) {
      writes.set(orgId, (waiting = []));
      void writeInTurn(db, orgId, writes, waiting);
    }
    waiting.push({ actor, work, about, resolve: resolve as (value: unknown) => void, reject, alone: false });
  });
}

/**
 * What a change says of itself so that the writer may read for it ahead: it writes no user row
 * but `userId`'s and creates or deletes no room; its first reads are `readsUser` the user (as
 * DirectoryChange.findUser) and `readsRoom` that room with it (as findRoomAndUser). The writer
 * then sends those reads right behind its batch's first statement, the version's bump, for each
 * change whose every predecessor in the batch says so and none of them writes its user (so the
 * row read then is the row the change would read in its turn): one round trip a change fewer
 * (pipelined-transactions.ts), in the chain of statements the organization's other writers wait
 * for. On PostgreSQL only: on SQLite a read costs no round trip.
 */
export interface ChangeAbout {
  userId: string;
  readsUser: boolean;
  readsRoom?: string;
}

/**
 * At most this many changes commit together. Each waits for those before it in its batch, and a
 * batch holds the organization's version (and so its other writers) until it commits.
 */
const BATCH_LIMIT = 64;

interface PendingChange {
  actor: Actor;
  work: (change: DirectoryChange) => Promise<unknown>;
  about: ChangeAbout | undefined;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** Run in a transaction of its own: its batch failed. */
  alone: boolean;
}

/** The changes waiting for each organization, per database; an organization is listed while its changes run. */
const organizationWrites = new WeakMap<Kysely<Database>, Map<string, PendingChange[]>>();

/** Runs the organization's waiting changes batch after batch until none waits. */
async function writeInTurn(db: Kysely<Database>, orgId: string, writes: Map<string, PendingChange[]>, waiting: PendingChange[]): Promise<void> {
  try {
    // Changes asked for in the same tick as the first join its batch.
    await Promise.resolve();
    while (waiting.length > 0) {
      const batch = waiting[0]!.alone ? waiting.splice(0, 1) : waiting.splice(0, Math.min(BATCH_LIMIT, leadingTogether(waiting)));
      const failed = await commitBatch(db, orgId, batch);
      // The changes before the one that failed run together again, it alone, those after it with the next.
      if (failed !== undefined)
        waiting.unshift(...batch.map((change, k) => (failed.at === undefined || k === failed.at ? { ...change, alone: true } : change)));
    }
  } finally {
    writes.delete(orgId);
    // Only if this loop broke (it should not): nothing is left waiting for an answer.
    for (const change of waiting.splice(0)) change.reject(new Error('the directory writer stopped'));
  }
}

/** How many changes at the head of the queue may run together (up to the first that must run alone). */
function leadingTogether(waiting: readonly PendingChange[]): number {
  const alone = waiting.findIndex((change) => change.alone);
  return alone === -1 ? waiting.length : alone;
}

/**
 * Runs `batch` in one transaction and answers each change. When a batch of several fails before
 * its commit, nothing of it is committed or answered: the result says which change failed, if
 * one did (else its last statements did), so that the batch is run again around it.
 */
async function commitBatch(db: Kysely<Database>, orgId: string, batch: readonly PendingChange[]): Promise<{ at: number | undefined } | undefined> {
  const results: unknown[] = [];
  try {
    // Statements by key, the same in every batch: named, parsed once per connection (prepared-statements.ts);
    // BEGIN and COMMIT sent with the first and last (pipelined-transactions.ts).
    await preparedStatements(() =>
      pipelinedTransaction(() =>
        db.transaction().execute(async (trx) => {
          const at = new Date().toISOString();
          // Only where a read costs a round trip: on SQLite a change's own read is as cheap.
          const reads = dialectOf(trx) === 'postgres' ? readsAheadOf(batch) : [];
          const ahead = usersAndRoomsByIds(
            trx,
            orgId,
            [...new Set(reads.flatMap((read) => read?.userId ?? []))],
            [...new Set(reads.flatMap((read) => read?.roomId ?? []))],
          );
          const sent = [ahead.users, ahead.rooms].filter((read): read is NonNullable<typeof read> => read !== undefined);
          const version = await withReadsAhead(sent, () => bumpDirectoryVersion(trx, orgId, randomUUID()));
          if (version === undefined) throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
          // A read ahead that fails (an id the database refuses, a plan gone stale) fails its batch
          // as its change's own read would have failed that change: run again, each change alone.
          let users: UserRecord[] = [];
          let rooms = new Set<string>();
          try {
            if (ahead.users !== undefined) users = (await trx.executeQuery(ahead.users)).rows;
            if (ahead.rooms !== undefined) rooms = new Set((await trx.executeQuery(ahead.rooms)).rows.map((room) => room.id));
          } catch (error) {
            throw batch.length > 1 ? new BatchFailed(undefined) : error;
          }
          const events: AuditEventRow[] = [];
          const tally: TallyMove[] = [];
          for (const [k, pending] of batch.entries()) {
            const read = reads[k];
            const change = new DirectoryChange(
              trx,
              orgId,
              version,
              at,
              pending.actor,
              {
                ...(read?.userId !== undefined ? { user: { id: read.userId, row: users.find((user) => user.id === read.userId) } } : {}),
                ...(read?.roomId !== undefined ? { room: { id: read.roomId, exists: rooms.has(read.roomId) } } : {}),
              },
              pending.about,
            );
            try {
              results.push(await pending.work(change));
            } catch (error) {
              throw batch.length > 1 ? new BatchFailed(k) : error;
            }
            events.push(...change.events);
            for (const move of change.organizationTally) addMove(tally, move.kind, move.delta);
          }
          if (events.length === 0) throw new NothingChanged();
          try {
            await recordBatch(
              trx,
              orgId,
              tally.filter((move) => move.delta !== 0),
              events,
            );
          } catch (error) {
            // A batch whose COMMIT's outcome is unknown may have committed: its changes are not run again.
            throw batch.length > 1 && !isOutcomeUnknown(error) ? new BatchFailed(undefined) : error;
          }
        }),
      ),
    );
  } catch (error) {
    if (error instanceof BatchFailed) return { at: error.at };
    if (!(error instanceof NothingChanged)) {
      // The bump failed (an unknown organization, the database gone), or the commit.
      for (const pending of batch) pending.reject(error);
      return undefined;
    }
  }
  batch.forEach((pending, index) => pending.resolve(results[index]));
  return undefined;
}

/** For each change of the batch, what the writer reads for it ahead (see ChangeAbout), if anything. */
function readsAheadOf(batch: readonly PendingChange[]): ({ userId?: string; roomId?: string } | undefined)[] {
  const written = new Set<string>();
  let saidSoFar = true;
  return batch.map(({ about }) => {
    saidSoFar &&= about !== undefined;
    if (!saidSoFar || about === undefined) return undefined;
    const userId = about.readsUser && !written.has(about.userId) ? about.userId : undefined;
    written.add(about.userId);
    return { ...(userId !== undefined ? { userId } : {}), ...(about.readsRoom !== undefined && userId !== undefined ? { roomId: about.readsRoom } : {}) };
  });
}

/** A change of a batch failed (`at`: which one; undefined: the batch's last statements): the batch is rolled back. */
class BatchFailed extends Error {
  readonly at: number | undefined;
  constructor(at: number | undefined) {
    super('a change of the batch failed');
    this.at = at;
  }
}
/** No change of the transaction recorded an event: it is rolled back. */
class NothingChanged extends Error {}

/** Creates an organization (409 `organization-exists` when the id is taken). */
export async function createOrganization(
  db: Kysely<Database>,
  organization: { id: string; name: string; externalSignatories: boolean },
  actor: Actor,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const at = new Date().toISOString();
    const created = await trx
      .insertInto('organizations')
      .values({ id: organization.id, name: organization.name, external_signatories: organization.externalSignatories ? 1 : 0, created_at: at, updated_at: at })
      .onConflict((oc) => oc.column('id').doNothing())
      .returning('directory_version')
      .executeTakeFirst();
    if (created === undefined) throw new ProblemError('organization-exists', `An organization with id "${organization.id}" already exists.`);
    await listDirectoryVersions(trx, [{ id: organization.id, directory_version: Number(created.directory_version) }], randomUUID());
    await insertAuditEvents(trx, [auditEvent(organization.id, actor, at, 'organization.created', { type: 'organization', id: organization.id })]);
  });
}
