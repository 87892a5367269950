import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { AuditEventTable, Database } from '../db/tables.ts';
import { etagOf, ifMatchTags } from '../domain/entity-tags.ts';
import { Collector, idAt, type Json } from '../domain/directory-entities.ts';
import { checkIfMatch, checkSameId, mergePatch, problemParameters, readInstants, readName, readUserBody } from '../domain/directory-requests.ts';
import { searchTerms } from '../domain/fold.ts';
import { effectivePageSize, toPage as pageFor, type Page } from '../domain/paging.ts';
import { sortKeyOrder, type SortDirection, type SortField, type UserStatus } from '../domain/signatory-rules.ts';
import { ProblemError, type ParameterError } from '../errors.ts';
import { findAuditEvents, type AuditEventQuery } from '../repositories/audit-repository.ts';
import {
  findOrganization,
  findRoom,
  findUser,
  isRoomMember,
  listOrganizations,
  listRooms,
  listUsers,
  type OrganizationRecord,
  type RoomRecord,
  type UserRecord,
} from '../repositories/directory-repository.ts';
import { SORT_KEY_COLUMNS } from '../repositories/signatory-repository.ts';
import type { AuditEventBody, OrganizationBody, RoomBody, UserBody } from '../schemas/directory.ts';
import type { Actor } from './audit.ts';
import { changeDirectory, createOrganization, type DirectoryChange, type UserWrite } from './directory-writer.ts';

/**
 * The directory management API (contract section 8) without HTTP: reads map rows to the API's
 * objects, writes go through the one directory writer, each in one transaction in which the
 * `If-Match` precondition is checked against the row as it is then (the writer's first statement
 * makes writers of an organization wait for each other, so two changes sent with the same tag
 * cannot both pass).
 */

/** A resource with the ETag of exactly this representation. */
export interface Tagged<T> {
  body: T;
  etag: string;
}

function tagged<T extends object>(body: T): Tagged<T> {
  return { body, etag: etagOf(body) };
}

/**
 * 412 unless `ifMatch` (an If-Match header: `*`, or a list of entity tags) names the current
 * representation; weak tags never match (RFC 9110 section 13.1.1 compares strongly).
 */
export function assertPrecondition(ifMatch: string | undefined, current: Tagged<object>): void {
  const tags = validIfMatch(ifMatch);
  if (tags === undefined || tags === '*') return;
  if (!tags.includes(current.etag)) {
    throw new ProblemError('precondition-failed', 'The resource changed since the version named by If-Match; read it again and retry.', {
      headers: { etag: current.etag },
    });
  }
}

/**
 * 412 unless `ifMatch` holds for a room membership, which has no representation of its own and
 * so no entity tag: only `*` can hold, and only while the user is a member (RFC 9110 section
 * 13.1.1: `*` is false when the resource has no current representation).
 */
export function assertMembershipPrecondition(ifMatch: string | undefined, isMember: boolean): void {
  const tags = validIfMatch(ifMatch);
  if (tags === undefined || (tags === '*' && isMember)) return;
  throw new ProblemError(
    'precondition-failed',
    tags === '*'
      ? 'If-Match: * holds only while the user is a member of the room, and it is not.'
      : 'A room membership has no entity tag, so no tag in If-Match can match it; only "*" can, while the user is a member.',
  );
}

/** An If-Match header's entity tags, `*`, or undefined when there is none; 400 when it is neither. */
function validIfMatch(ifMatch: string | undefined): string[] | '*' | undefined {
  const tags = ifMatchTags(ifMatch);
  if (tags === 'malformed') {
    const problems = new Collector();
    checkIfMatch(ifMatch, problems);
    throw new ProblemError('invalid-parameter', `If-Match must be "*" or a list of quoted entity tags, got ${JSON.stringify(ifMatch)}.`, {
      errors: problemParameters(problems.problems),
    });
  }
  return tags;
}

export function toOrganization(row: OrganizationRecord): OrganizationBody {
  return {
    id: row.id,
    name: row.name,
    settings: { externalSignatories: row.external_signatories === 1 },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toUser(row: UserRecord): UserBody {
  return {
    id: row.id,
    firstname: row.firstname,
    lastname: row.lastname,
    email: row.email,
    external: row.external === 1,
    status: row.status as UserStatus,
    userName: row.user_name ?? row.email,
    externalId: row.external_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toRoom(row: RoomRecord): RoomBody {
  return { id: row.id, name: row.name, memberCount: row.member_count, createdAt: row.created_at, updatedAt: row.updated_at };
}

function toAuditEvent(row: Selectable<AuditEventTable>): AuditEventBody {
  return {
    id: row.id,
    at: row.at,
    actor: row.actor,
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    requestId: row.request_id,
    details: JSON.parse(row.details) as Record<string, unknown>,
  };
}

/** 400 naming every problem, with the field as its parameter. */
function invalid(problems: readonly { path: string; message: string }[]): ProblemError {
  const errors: ParameterError[] = problemParameters(problems);
  return new ProblemError('invalid-parameter', errors.map((error) => `${error.parameter} ${error.message}`).join('; '), { errors });
}

/** 400 when an `id` sent in a body is not the resource's own. */
function assertSameId(sent: unknown, id: string): void {
  const problems = new Collector();
  checkSameId(sent, id, problems);
  if (problems.problems.length > 0) throw invalid(problems.problems);
}

/** The user fields of a body, validated by the import file's rules; 400 naming every bad field. */
function userWrite(body: Json, id: string): UserWrite {
  const problems = new Collector();
  const user = readUserBody(body, id, problems);
  if (user === undefined) throw invalid(problems.problems);
  // A userName that is the user's own email reads the same unset, and then follows the email; one
  // that differs in case only is kept as given (identity providers read back what they sent).
  return { ...user, userName: user.userName !== null && user.userName === user.email ? null : user.userName };
}

/**
 * The `name` of an organization or room body; `fallback` (its id) when left out or null, as on
 * creation, so a `PUT` without it and a merge patch's `null` reset it; 400 when it is not a name.
 */
export function nameOf(body: Json, fallback: string): string {
  const problems = new Collector();
  const name = readName(body, fallback, problems);
  if (name === undefined) throw invalid(problems.problems);
  return name;
}

export interface UserListRequest {
  page: number;
  size: number;
  searchQuery?: string | undefined;
  sortBy: SortField;
  sortDirection: SortDirection;
  status?: UserStatus | undefined;
}

export class DirectoryService {
  readonly #db: Kysely<Database>;
  readonly #maxPageSize: number;

  constructor(db: Kysely<Database>, maxPageSize: number) {
    this.#db = db;
    this.#maxPageSize = maxPageSize;
  }

  async listOrganizations(ids: readonly string[] | undefined, page: number, size: number): Promise<Page<OrganizationBody>> {
    const effective = effectivePageSize(size, this.#maxPageSize);
    const { total, rows } = await listOrganizations(this.#db, ids, page * effective, effective);
    return pageFor(rows.map(toOrganization), { page, size: effective }, total);
  }

  async organization(orgId: string): Promise<Tagged<OrganizationBody>> {
    const row = await findOrganization(this.#db, orgId);
    if (row === undefined) throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
    return tagged(toOrganization(row));
  }

  async createOrganization(
    body: { id: string; name?: string | undefined; settings?: { externalSignatories?: boolean | undefined } | undefined },
    actor: Actor,
  ): Promise<Tagged<OrganizationBody>> {
    const name = nameOf(body, body.id);
    await createOrganization(this.#db, { id: body.id, name, externalSignatories: body.settings?.externalSignatories ?? false }, actor);
    return this.organization(body.id);
  }

  async patchOrganization(orgId: string, patch: Json, ifMatch: string | undefined, actor: Actor): Promise<Tagged<OrganizationBody>> {
    return changeDirectory(this.#db, orgId, actor, async (change) => {
      const current = tagged(toOrganization((await findOrganization(change.trx, orgId))!));
      assertPrecondition(ifMatch, current);
      assertSameId(patch['id'], orgId);
      const next = mergePatch(current.body, patch) as Json & { settings?: { externalSignatories?: unknown } };
      const name = nameOf(next, orgId);
      const externalSignatories = next.settings?.externalSignatories === true;
      const changed = [
        ...(name !== current.body.name ? ['name'] : []),
        ...(externalSignatories !== current.body.settings.externalSignatories ? ['settings.externalSignatories'] : []),
      ];
      if (changed.length === 0) return current;
      await change.updateOrganization({ name, externalSignatories }, { changed });
      return tagged(toOrganization((await findOrganization(change.trx, orgId))!));
    });
  }

  async listUsers(orgId: string, request: UserListRequest, roomId?: string): Promise<Page<UserBody>> {
    await this.#assertScope(orgId, roomId);
    const size = effectivePageSize(request.size, this.#maxPageSize);
    const terms = searchTerms(request.searchQuery);
    if (terms.some((term) => term.includes('\0'))) return pageFor([], { page: request.page, size }, 0);
    const { total, rows } = await listUsers(
      this.#db,
      {
        orgId,
        terms,
        status: request.status,
        roomId,
        sortColumns: sortKeyOrder(request.sortBy).map((field) => SORT_KEY_COLUMNS[field]),
        direction: request.sortDirection === 'DESC' ? 'desc' : 'asc',
      },
      request.page * size,
      size,
    );
    return pageFor(rows.map(toUser), { page: request.page, size }, total);
  }

  async user(orgId: string, userId: string): Promise<Tagged<UserBody>> {
    return tagged(toUser(await this.#existingUser(this.#db, orgId, userId)));
  }

  async createUser(orgId: string, body: Json, actor: Actor): Promise<Tagged<UserBody>> {
    const user = userWrite(body, typeof body['id'] === 'string' ? body['id'] : randomUUID());
    return changeDirectory(this.#db, orgId, actor, async (change) => tagged(toUser(await change.createUser(user))), { userId: user.id, readsUser: false });
  }

  async replaceUser(orgId: string, userId: string, body: Json, ifMatch: string | undefined, actor: Actor): Promise<Tagged<UserBody>> {
    assertSameId(body['id'], userId);
    return this.changeUser(orgId, userId, ifMatch, actor, () => body);
  }

  async patchUser(orgId: string, userId: string, patch: Json, ifMatch: string | undefined, actor: Actor): Promise<Tagged<UserBody>> {
    assertSameId(patch['id'], userId);
    return this.changeUser(orgId, userId, ifMatch, actor, (current) => {
      // userName reads as the email while unset: it stays unset unless the patch sets it.
      const base: Json = { ...current, userName: current.userName === current.email ? undefined : current.userName };
      return mergePatch(base, patch) as Json;
    });
  }

  /**
   * Writes the user `next` makes of it as it is in the change's transaction (validated as a PUT
   * body), so a write landing just before is built on, not lost nor a 412 when no `If-Match` was
   * sent: PATCH here and SCIM's PUT and PATCH compute the new user from the row as it is then.
   */
  async changeUser(orgId: string, userId: string, ifMatch: string | undefined, actor: Actor, next: (current: UserBody) => Json): Promise<Tagged<UserBody>> {
    return changeDirectory(
      this.#db,
      orgId,
      actor,
      async (change) => {
        const existing = await this.#existingUser(change.trx, orgId, userId, change.findUser(userId));
        const current = tagged(toUser(existing));
        assertPrecondition(ifMatch, current);
        const user = userWrite(next(current.body), userId);
        const changed = (Object.keys(user) as (keyof UserWrite)[]).filter(
          (key) => key !== 'id' && JSON.stringify(user[key]) !== JSON.stringify(fieldOf(existing, key)),
        );
        // A write that changes nothing records no event and spends no version (docs/decisions.md, "The audit trail").
        if (changed.length === 0) return current;
        return tagged(toUser(await change.updateUser(existing, user, { changed })));
      },
      { userId, readsUser: true },
    );
  }

  async deleteUser(orgId: string, userId: string, ifMatch: string | undefined, actor: Actor): Promise<void> {
    await changeDirectory(
      this.#db,
      orgId,
      actor,
      async (change) => {
        const existing = await this.#existingUser(change.trx, orgId, userId, change.findUser(userId));
        assertPrecondition(ifMatch, tagged(toUser(existing)));
        await change.deleteUser(existing);
      },
      { userId, readsUser: true },
    );
  }

  async listRooms(orgId: string, page: number, size: number): Promise<Page<RoomBody>> {
    await this.#assertScope(orgId);
    const effective = effectivePageSize(size, this.#maxPageSize);
    const { total, rows } = await listRooms(this.#db, orgId, page * effective, effective);
    return pageFor(rows.map(toRoom), { page, size: effective }, total);
  }

  async room(orgId: string, roomId: string): Promise<Tagged<RoomBody>> {
    return tagged(toRoom(await this.#existingRoom(this.#db, orgId, roomId)));
  }

  async createRoom(orgId: string, body: Json, actor: Actor): Promise<Tagged<RoomBody>> {
    const id = typeof body['id'] === 'string' ? body['id'] : randomUUID();
    const problems = new Collector();
    idAt({ id }, '', 'room', problems);
    if (problems.problems.length > 0) throw invalid(problems.problems);
    const name = nameOf(body, id);
    return changeDirectory(this.#db, orgId, actor, async (change) => {
      await change.createRoom({ id, name });
      return tagged(toRoom((await findRoom(change.trx, orgId, id))!));
    });
  }

  async replaceRoom(orgId: string, roomId: string, body: Json, ifMatch: string | undefined, actor: Actor): Promise<Tagged<RoomBody>> {
    assertSameId(body['id'], roomId);
    return this.#changeRoom(orgId, roomId, ifMatch, actor, () => body);
  }

  async patchRoom(orgId: string, roomId: string, patch: Json, ifMatch: string | undefined, actor: Actor): Promise<Tagged<RoomBody>> {
    assertSameId(patch['id'], roomId);
    return this.#changeRoom(orgId, roomId, ifMatch, actor, (current) => mergePatch(current, patch) as Json);
  }

  async #changeRoom(orgId: string, roomId: string, ifMatch: string | undefined, actor: Actor, next: (current: RoomBody) => Json): Promise<Tagged<RoomBody>> {
    return changeDirectory(this.#db, orgId, actor, async (change) => {
      const current = tagged(toRoom(await this.#existingRoom(change.trx, orgId, roomId)));
      assertPrecondition(ifMatch, current);
      const name = nameOf(next(current.body), roomId);
      if (name === current.body.name) return current;
      await change.updateRoom(roomId, name, { changed: ['name'] });
      return tagged(toRoom((await findRoom(change.trx, orgId, roomId))!));
    });
  }

  async deleteRoom(orgId: string, roomId: string, ifMatch: string | undefined, actor: Actor): Promise<void> {
    await changeDirectory(this.#db, orgId, actor, async (change) => {
      assertPrecondition(ifMatch, tagged(toRoom(await this.#existingRoom(change.trx, orgId, roomId))));
      await change.deleteRoom(roomId);
    });
  }

  /** Adds (`add`) or removes a member; idempotent. */
  async setMember(orgId: string, roomId: string, userId: string, add: boolean, ifMatch: string | undefined, actor: Actor): Promise<void> {
    await changeDirectory(
      this.#db,
      orgId,
      actor,
      async (change: DirectoryChange) => {
        const { roomExists, user } = await change.findRoomAndUser(roomId, userId);
        if (!roomExists) await this.#existingRoom(change.trx, orgId, roomId);
        if (user === undefined) throw userNotFound(orgId, userId);
        // Read (only when asked) in the change, which the organization's other writers wait for.
        if (ifMatch !== undefined) assertMembershipPrecondition(ifMatch, await isRoomMember(change.trx, orgId, roomId, userId));
        // Nothing changed records no event: the writer spends no version on it.
        if (add) await change.addMember(roomId, user);
        else await change.removeMember(roomId, user);
      },
      { userId, readsUser: true, readsRoom: roomId },
    );
  }

  async auditEvents(query: AuditEventQuery, page: number, size: number): Promise<Page<AuditEventBody>> {
    await this.#assertScope(query.orgId);
    const problems = new Collector();
    const { since, until } = readInstants(query, problems);
    if (problems.problems.length > 0) throw invalid(problems.problems);
    const normalized = { ...query, since, until };
    const effective = effectivePageSize(size, this.#maxPageSize);
    // No actor holds a NUL (PostgreSQL refuses one in any text it is sent).
    if (normalized.actor?.includes('\0') === true) return pageFor([], { page, size: effective }, 0);
    const { total, rows } = await findAuditEvents(this.#db, normalized, page * effective, effective);
    return pageFor(rows.map(toAuditEvent), { page, size: effective }, total);
  }

  /** The user, or 404 for it or its organization; `found`: the user as read already (in a change, maybe ahead: ChangeAbout). */
  async #existingUser(
    db: Kysely<Database>,
    orgId: string,
    userId: string,
    found: Promise<UserRecord | undefined> = findUser(db, orgId, userId),
  ): Promise<UserRecord> {
    const row = await found;
    if (row !== undefined) return row;
    await this.#assertScope(orgId, undefined, db);
    throw userNotFound(orgId, userId);
  }

  async #existingRoom(db: Kysely<Database>, orgId: string, roomId: string): Promise<RoomRecord> {
    const row = await findRoom(db, orgId, roomId);
    if (row !== undefined) return row;
    await this.#assertScope(orgId, undefined, db);
    throw new ProblemError('room-not-found', `Signing room "${roomId}" does not exist in organization "${orgId}".`);
  }

  /** 404 for an unknown organization (or room of it). */
  async #assertScope(orgId: string, roomId?: string, db: Kysely<Database> = this.#db): Promise<void> {
    if (roomId !== undefined) await this.#existingRoom(db, orgId, roomId);
    else if ((await findOrganization(db, orgId)) === undefined) throw new ProblemError('organization-not-found', `Organization "${orgId}" does not exist.`);
  }
}

function userNotFound(orgId: string, userId: string): ProblemError {
  return new ProblemError('user-not-found', `User "${userId}" does not exist in organization "${orgId}".`);
}

function fieldOf(row: UserRecord, key: keyof UserWrite): unknown {
  switch (key) {
    case 'external':
      return row.external === 1;
    case 'userName':
      return row.user_name;
    case 'externalId':
      return row.external_id;
    default:
      return row[key];
  }
}
