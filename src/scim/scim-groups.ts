import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import type { Actor } from '../directory/audit.ts';
import { assertPrecondition, nameOf, type DirectoryService } from '../directory/directory-service.ts';
import { etagOf } from '../domain/entity-tags.ts';
import { changeDirectory, type DirectoryChange } from '../directory/directory-writer.ts';
import { ProblemError } from '../errors.ts';
import {
  findOrganization,
  findRoom,
  findRoomMemberIds,
  findScimGroups,
  findUsersByIds,
  type RoomRecord,
  type ScimGroupQuery,
} from '../repositories/directory-repository.ts';
import { groupFromScim, groupPatch, parseGroupFilter, toScimGroup, type GroupChange, type ScimGroup } from './group-resource.ts';
import { ScimError } from './scim-error.ts';
import { asScim, LIST_RESPONSE_SCHEMA, type ScimList } from './scim-users.ts';

export interface GroupLocations {
  group: (id: string) => string;
  user: (id: string) => string;
}

/**
 * A room's version: its representation and how its members last changed: the version of the
 * last import that replaced them, and of the last change one by one with the count of such
 * changes (changes that commit together share a directory version; a member added and another
 * removed keep the member count).
 */
function versionOf(room: RoomRecord): string {
  return etagOf({
    id: room.id,
    name: room.name,
    externalId: room.external_id ?? null,
    updatedAt: room.updated_at,
    members: [room.members_changed_in ?? 0, room.members_edited_in ?? 0, room.member_edits ?? 0, room.member_count],
  });
}

/** The room name a group's displayName gives (the room's id when none); 400 `invalidValue` naming displayName otherwise. */
function roomName(displayName: string | undefined, fallback: string): string {
  try {
    return nameOf({ name: displayName }, fallback);
  } catch (error) {
    if (!(error instanceof ProblemError)) throw error;
    throw new ScimError(400, `"displayName" ${error.errors?.[0]?.message ?? error.message}`, 'invalidValue');
  }
}

function roomForGroup(room: RoomRecord) {
  return { id: room.id, name: room.name, externalId: room.external_id ?? null, createdAt: room.created_at, updatedAt: room.updated_at };
}

/**
 * SCIM `/Groups` of one organization as its signing rooms (contract section 9), through the one
 * directory writer: a group's write is one transaction, with one audit event per change it makes
 * (`room.created`, `room.updated`, `room.member.added`, `room.member.removed`).
 */
export class ScimGroups {
  readonly #db: Kysely<Database>;
  readonly #directory: DirectoryService;

  constructor(db: Kysely<Database>, directory: DirectoryService) {
    this.#db = db;
    this.#directory = directory;
  }

  async list(
    orgId: string,
    request: { filter?: string | undefined; startIndex: number; count: number; members: boolean },
    at: GroupLocations,
  ): Promise<ScimList<ScimGroup>> {
    const query: ScimGroupQuery = { orgId };
    for (const condition of request.filter === undefined ? [] : parseGroupFilter(request.filter)) {
      if (condition.attribute === 'displayName') (query.nameLower ??= []).push(condition.value.toLowerCase());
      if (condition.attribute === 'externalId') (query.externalId ??= []).push(condition.value);
      if (condition.attribute === 'id') (query.id ??= []).push(condition.value);
      if (condition.attribute === 'members') (query.member ??= []).push(condition.value);
    }
    await asScim(() => this.#directory.organization(orgId));
    const { total, rows } = await findScimGroups(this.#db, query, request.startIndex - 1, request.count);
    const resources: ScimGroup[] = [];
    for (const room of rows) resources.push(await this.#groupOf(this.#db, orgId, room, request.members, at));
    return { schemas: [LIST_RESPONSE_SCHEMA], totalResults: total, startIndex: request.startIndex, itemsPerPage: resources.length, Resources: resources };
  }

  /** The group; its member list only when `members` (a room may have 100,000). */
  async get(orgId: string, roomId: string, members: boolean, at: GroupLocations): Promise<ScimGroup> {
    return this.#groupOf(this.#db, orgId, await this.#existing(this.#db, orgId, roomId), members, at);
  }

  async create(orgId: string, body: Record<string, unknown>, actor: Actor, at: GroupLocations): Promise<ScimGroup> {
    const change = groupFromScim(body);
    const id = randomUUID();
    const name = roomName(change.name, id);
    return this.#write(orgId, actor, async (writer) => {
      await writer.createRoom({ id, name, externalId: change.externalId ?? null });
      await this.#applyMembers(writer, orgId, id, change);
      return this.#groupOf(writer.trx, orgId, (await findRoom(writer.trx, orgId, id))!, true, at);
    });
  }

  async replace(
    orgId: string,
    roomId: string,
    body: Record<string, unknown>,
    ifMatch: string | undefined,
    actor: Actor,
    at: GroupLocations,
  ): Promise<ScimGroup> {
    return this.#change(orgId, roomId, groupFromScim(body, roomId), ifMatch, actor, at);
  }

  async patch(orgId: string, roomId: string, body: unknown, ifMatch: string | undefined, actor: Actor, at: GroupLocations): Promise<ScimGroup> {
    return this.#change(orgId, roomId, groupPatch(body, roomId), ifMatch, actor, at);
  }

  async delete(orgId: string, roomId: string, ifMatch: string | undefined, actor: Actor): Promise<void> {
    await this.#write(orgId, actor, async (writer) => {
      const room = await this.#existing(writer.trx, orgId, roomId);
      assertPrecondition(ifMatch, { body: room, etag: versionOf(room) });
      await writer.deleteRoom(roomId);
    });
  }

  async #change(orgId: string, roomId: string, change: GroupChange, ifMatch: string | undefined, actor: Actor, at: GroupLocations): Promise<ScimGroup> {
    return this.#write(orgId, actor, async (writer) => {
      const room = await this.#existing(writer.trx, orgId, roomId);
      assertPrecondition(ifMatch, { body: room, etag: versionOf(room) });
      const name = change.name === undefined ? room.name : roomName(change.name, roomId);
      const externalId = change.externalId === undefined ? (room.external_id ?? null) : change.externalId;
      if (name !== room.name || externalId !== (room.external_id ?? null)) {
        const changed = [...(name !== room.name ? ['name'] : []), ...(externalId !== (room.external_id ?? null) ? ['externalId'] : [])];
        await writer.updateRoom(roomId, name, { changed }, externalId);
      }
      await this.#applyMembers(writer, orgId, roomId, change);
      return this.#groupOf(writer.trx, orgId, (await findRoom(writer.trx, orgId, roomId))!, true, at);
    });
  }

  /** The member changes, each checked to be a user of the organization (400 `invalidValue` naming the first that is not: nothing changes). */
  async #applyMembers(writer: DirectoryChange, orgId: string, roomId: string, change: GroupChange): Promise<void> {
    const current = new Set(change.members !== undefined || change.removeAll === true ? await findRoomMemberIds(writer.trx, orgId, roomId) : []);
    const wanted = change.members ?? (change.removeAll === true ? change.add : undefined);
    const wantedSet = new Set(wanted);
    const add = wanted !== undefined ? wanted.filter((id) => !current.has(id)) : change.add;
    const remove = wanted !== undefined ? [...current].filter((id) => !wantedSet.has(id)) : change.remove;
    const ids = [...new Set([...add, ...remove])];
    const users = new Map((await findUsersByIds(writer.trx, orgId, ids)).map((user) => [user.id, user]));
    const unknown = [...new Set(add)].find((id) => !users.has(id));
    if (unknown !== undefined) throw new ScimError(400, `"${unknown}" is not a user of this organization.`, 'invalidValue');
    for (const id of new Set(add)) await writer.addMember(roomId, users.get(id)!);
    for (const id of new Set(remove)) {
      const user = users.get(id);
      if (user !== undefined) await writer.removeMember(roomId, user);
    }
  }

  async #groupOf(db: Kysely<Database>, orgId: string, room: RoomRecord, members: boolean, at: GroupLocations): Promise<ScimGroup> {
    const list = members ? await findRoomMemberIds(db, orgId, room.id) : undefined;
    return toScimGroup(roomForGroup(room), list, at.group(room.id), versionOf(room), at.user);
  }

  /** The room, read with `db` (inside a write, its transaction: SQLite has one connection); 404 for an unknown organization or room. */
  async #existing(db: Kysely<Database>, orgId: string, roomId: string): Promise<RoomRecord> {
    const room = await findRoom(db, orgId, roomId);
    if (room !== undefined) return room;
    if ((await findOrganization(db, orgId)) === undefined) throw new ScimError(404, `Organization "${orgId}" does not exist.`);
    throw new ScimError(404, `Group "${roomId}" does not exist in organization "${orgId}".`);
  }

  /**
   * One write through the directory writer. One that changes nothing (a member added twice, a name
   * set to itself) records no event, so the writer spends no directory version on it, as for the
   * REST routes.
   */
  async #write<T>(orgId: string, actor: Actor, work: (writer: DirectoryChange) => Promise<T>): Promise<T> {
    return asScim(() => changeDirectory(this.#db, orgId, actor, work));
  }
}
