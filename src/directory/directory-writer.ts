import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, RoomTable } from '../db/tables.ts';
import { isCandidateStatus } from '../domain/signatory-rules.ts';
import { ProblemError } from '../errors.ts';
import { insertAuditEvents, type AuditEventRow } from '../repositories/audit-repository.ts';
import { auditEvent, type Actor, type AuditAction } from './audit.ts';
import { findEmailAndUserNameOwners, findUserRow, isMember, lockRoom, roomHasDocuments, type UserRecord } from '../repositories/directory-repository.ts';
import { bumpDirectoryVersion, insertMemberRows, listDirectoryVersions } from '../repositories/directory-write-repository.ts';
import { moveInRoomTally, moveInTallies, type TallyKind } from '../repositories/user-tally-repository.ts';
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

function kindOf(row: { external: number; needs_invite: number; status: string }): TallyKind {
  return { external: row.external, needs_invite: row.needs_invite, candidate: isCandidateStatus(row.status) ? 1 : 0 };
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

  constructor(trx: Transaction<Database>, orgId: string, version: number, at: string, actor: Actor) {
    this.trx = trx;
    this.orgId = orgId;
    this.version = version;
    this.at = at;
    this.#actor = actor;
  }

  /** Records the audit event of a change made here (written before the commit). */
  /** How many events this change has recorded so far: none means it changed nothing. */
  get recorded(): number {
    return this.#events.length;
  }

  audit(action: AuditAction, target: { type: string; id: string }, details: object = {}): void {
    this.#events.push(auditEvent(this.orgId, this.#actor, this.at, action, target, details));
  }

  /** Writes the events recorded: called once, last. */
  async flush(): Promise<void> {
    await insertAuditEvents(this.trx, this.#events);
  }

  /** 409 unless the email, and the userName the user reads as (its email while it has none), are free in the organization (but for `userId`'s own). */
  async #assertUnique(user: UserWrite, userId: string): Promise<void> {
    const userName = user.userName ?? user.email;
    const { emailOwner, userNameOwner } = await findEmailAndUserNameOwners(this.trx, this.orgId, user.email.toLowerCase(), userName.toLowerCase());
    if (emailOwner !== undefined && emailOwner !== userId) {
      throw new ProblemError('email-taken', `The email "${user.email}" already belongs to another user of organization "${this.orgId}".`);
    }
    if (userNameOwner !== undefined && userNameOwner !== userId) {
      throw new ProblemError('user-name-taken', `The userName "${userName}" already belongs to another user of organization "${this.orgId}".`);
    }
  }

  /** Creates a user (409 `user-exists` when the id is taken); a deleted user's id is taken again, as a new user. */
  async createUser(user: UserWrite): Promise<UserRecord> {
    const stored = await findUserRow(this.trx, this.orgId, user.id);
    if (stored !== undefined && stored.status !== 'deleted') {
      throw new ProblemError('user-exists', `A user with id "${user.id}" already exists in organization "${this.orgId}".`);
    }
    await this.#assertUnique(user, user.id);
    const row = { ...userRow(this.orgId, user, this.version, this.at), ...scimColumns(user) };
    let created: UserRecord;
    if (stored === undefined) {
      created = await this.trx.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
    } else {
      created = await this.trx
        .updateTable('users')
        .set(row)
        .where('org_id', '=', this.orgId)
        .where('id', '=', user.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await moveInTallies(this.trx, this.orgId, user.id, kindOf(stored), undefined);
    }
    await moveInTallies(this.trx, this.orgId, user.id, undefined, kindOf(row));
    this.audit('user.created', { type: 'user', id: user.id });
    return created;
  }

  /** Replaces a stored user's fields; `changed_in` moves only if what a lookup shows or tests of it changed. */
  async updateUser(existing: UserRecord, user: UserWrite, details: object = {}): Promise<UserRecord> {
    await this.#assertUnique(user, existing.id);
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
    const updated = await this.trx
      .updateTable('users')
      .set({ ...columns, ...scimColumns(user), changed_in: indexedSame ? existing.changed_in : this.version })
      .where('org_id', '=', this.orgId)
      .where('id', '=', existing.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await moveInTallies(this.trx, this.orgId, existing.id, kindOf(existing), kindOf(next));
    this.audit('user.updated', { type: 'user', id: existing.id }, details);
    return updated;
  }

  /**
   * Deletes a user: out of every room, and its row emptied of personal data but kept as `deleted`
   * (in-memory search indexes pass over it as a change; its id may be taken again).
   */
  async deleteUser(existing: UserRecord): Promise<void> {
    await moveInTallies(this.trx, this.orgId, existing.id, kindOf(existing), undefined);
    const rooms = await this.trx.selectFrom('room_members').select('room_id').where('org_id', '=', this.orgId).where('user_id', '=', existing.id).execute();
    await this.trx.deleteFrom('room_members').where('org_id', '=', this.orgId).where('user_id', '=', existing.id).execute();
    await this.#membersEdited(rooms.map((room) => room.room_id));
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
    if (await isMember(this.trx, this.orgId, roomId, user.id)) return false;
    await insertMemberRows(this.trx, [{ org_id: this.orgId, room_id: roomId, user_id: user.id }]);
    await moveInRoomTally(this.trx, this.orgId, roomId, kindOf(user), 1);
    await this.#membersEdited([roomId], user.id);
    this.audit('room.member.added', { type: 'room', id: roomId }, { userId: user.id });
    return true;
  }

  /** Removes a user from a room; false (and nothing recorded) when it is not a member. */
  async removeMember(roomId: string, user: UserRecord): Promise<boolean> {
    if (!(await isMember(this.trx, this.orgId, roomId, user.id))) return false;
    await this.trx.deleteFrom('room_members').where('org_id', '=', this.orgId).where('room_id', '=', roomId).where('user_id', '=', user.id).execute();
    await moveInRoomTally(this.trx, this.orgId, roomId, kindOf(user), -1);
    await this.#membersEdited([roomId], user.id);
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

  /**
   * Marks one user's membership of these rooms changed in this version, for the search indexes: the
   * rooms as edited, the user as changed, so an index holding a room's members lays the user's
   * memberships over them (instead of reading the room's members again).
   */
  async #membersEdited(roomIds: readonly string[], userId?: string): Promise<void> {
    if (roomIds.length === 0) return;
    await this.trx
      .updateTable('rooms')
      .set({ members_edited_in: this.version })
      .where('org_id', '=', this.orgId)
      .where('id', 'in', [...roomIds])
      .execute();
    if (userId !== undefined)
      await this.trx.updateTable('users').set({ changed_in: this.version }).where('org_id', '=', this.orgId).where('id', '=', userId).execute();
  }
}

function scimColumns(user: UserWrite) {
  return { user_name: user.userName, user_name_lower: user.userName?.toLowerCase() ?? null, external_id: user.externalId };
}

/**
 * Runs `work` as one change to the organization's directory, in one transaction: its version is
 * bumped first (404 `organization-not-found` for an unknown organization), its events written
 * last. Anything thrown rolls everything back, the version and the events included.
 */
export async function changeDirectory<T>(db: Kysely<Database>, orgId: string, actor: Actor, work: (change: DirectoryChange) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const at = new Date().toISOString();
    const version = await bumpDirectoryVersion(trx, orgId, randomUUID());
    if (version === undefined) throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
    const change = new DirectoryChange(trx, orgId, version, at, actor);
    const result = await work(change);
    await change.flush();
    return result;
  });
}

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
