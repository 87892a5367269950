import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import type { Actor } from '../directory/audit.ts';
import { toUser, type DirectoryService, type Tagged } from '../directory/directory-service.ts';
import { etagOf } from '../domain/entity-tags.ts';
import { ProblemError } from '../errors.ts';
import { findScimUsers, type ScimUserQuery } from '../repositories/directory-repository.ts';
import type { UserBody } from '../schemas/directory.ts';
import { ScimError } from './scim-error.ts';
import { parseUserFilter } from './user-filter.ts';
import { applyUserPatch, readUserPatch, toScimUser, userFromScim, type ScimUser } from './user-resource.ts';

export const LIST_RESPONSE_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
/** `count` when none is asked for, and the most one page holds (contract section 9). */
export const DEFAULT_COUNT = 100;
export const MAX_COUNT = 1_000;

export interface ScimList<T> {
  schemas: [typeof LIST_RESPONSE_SCHEMA];
  totalResults: number;
  startIndex: number;
  itemsPerPage: number;
  Resources: T[];
}

/** Paging as RFC 7644 §3.4.2.4 reads it: `startIndex` below 1 is 1, `count` below 0 is 0, above MAX_COUNT is MAX_COUNT. */
export function scimPaging(startIndex: number | undefined, count: number | undefined): { startIndex: number; count: number } {
  return { startIndex: Math.max(1, startIndex ?? 1), count: Math.min(MAX_COUNT, Math.max(0, count ?? DEFAULT_COUNT)) };
}

/** A problem from the directory service as the SCIM error an identity provider understands. */
function scimErrorOf(error: unknown): unknown {
  if (!(error instanceof ProblemError)) return error;
  switch (error.code) {
    case 'invalid-parameter':
    case 'malformed-request':
      return new ScimError(400, error.message, 'invalidValue');
    case 'email-taken':
    case 'user-name-taken':
    case 'user-exists':
    case 'room-exists':
      return new ScimError(409, error.message, 'uniqueness');
    default:
      return new ScimError(error.statusCode, error.message);
  }
}

/** Runs `work`, any directory problem it throws turned into the SCIM error it means. */
export async function asScim<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw scimErrorOf(error);
  }
}

/**
 * SCIM `/Users` of one organization (contract section 9) over the directory service: every write
 * is the REST write it maps to, through the one directory writer (audited, read your writes).
 */
export class ScimUsers {
  readonly #db: Kysely<Database>;
  readonly #directory: DirectoryService;

  constructor(db: Kysely<Database>, directory: DirectoryService) {
    this.#db = db;
    this.#directory = directory;
  }

  async list(
    orgId: string,
    request: { filter?: string | undefined; startIndex: number; count: number },
    locationOf: (id: string) => string,
  ): Promise<ScimList<ScimUser>> {
    const query: ScimUserQuery = { orgId };
    for (const condition of request.filter === undefined ? [] : parseUserFilter(request.filter)) {
      if (condition.attribute === 'userName') (query.userNameLower ??= []).push(condition.value.toLowerCase());
      if (condition.attribute === 'email') (query.emailLower ??= []).push(condition.value.toLowerCase());
      if (condition.attribute === 'externalId') (query.externalId ??= []).push(condition.value);
      if (condition.attribute === 'id') (query.id ??= []).push(condition.value);
      if (condition.attribute === 'displayName') (query.displayNameLower ??= []).push(condition.value.toLowerCase());
    }
    const { total, rows } = await findScimUsers(this.#db, query, request.startIndex - 1, request.count);
    // An empty answer may be an organization that does not exist: 404 then (the token's scope was checked).
    if (rows.length === 0) await asScim(() => this.#directory.organization(orgId));
    const resources = rows.map((row) => {
      const body = toUser(row);
      return toScimUser(body, locationOf(body.id), etagOf(body));
    });
    return { schemas: [LIST_RESPONSE_SCHEMA], totalResults: total, startIndex: request.startIndex, itemsPerPage: resources.length, Resources: resources };
  }

  async get(orgId: string, userId: string, locationOf: (id: string) => string): Promise<ScimUser> {
    return scimUserOf(await asScim(() => this.#directory.user(orgId, userId)), locationOf);
  }

  async create(orgId: string, body: Record<string, unknown>, actor: Actor, locationOf: (id: string) => string): Promise<ScimUser> {
    const user = userFromScim(body, undefined);
    return scimUserOf(await asScim(() => this.#directory.createUser(orgId, user, actor)), locationOf);
  }

  async replace(
    orgId: string,
    userId: string,
    body: Record<string, unknown>,
    ifMatch: string | undefined,
    actor: Actor,
    locationOf: (id: string) => string,
  ): Promise<ScimUser> {
    const sentId = Object.entries(body).find(([key]) => key.toLowerCase() === 'id')?.[1];
    if (sentId !== undefined && sentId !== userId) throw new ScimError(400, '"id" is read-only.', 'mutability');
    // Checked before the write (which waits for the organization's other writers), as it will be read in it.
    userFromScim(body, undefined);
    return this.#change(orgId, userId, ifMatch, actor, locationOf, (current) => userFromScim(body, current, { keepExternal: true }));
  }

  async patch(orgId: string, userId: string, body: unknown, ifMatch: string | undefined, actor: Actor, locationOf: (id: string) => string): Promise<ScimUser> {
    const operations = readUserPatch(body, userId);
    return this.#change(orgId, userId, ifMatch, actor, locationOf, (current) =>
      userFromScim(applyUserPatch(toScimUser(current, locationOf(userId), etagOf(current)), operations), current),
    );
  }

  /** A PUT or PATCH: the user `next` makes of it as it is in the write's transaction (a concurrent write is built on, not a 412 unless `ifMatch` says so). */
  async #change(
    orgId: string,
    userId: string,
    ifMatch: string | undefined,
    actor: Actor,
    locationOf: (id: string) => string,
    next: (current: UserBody) => Record<string, unknown>,
  ): Promise<ScimUser> {
    return scimUserOf(
      await asScim(() => this.#directory.changeUser(orgId, userId, ifMatch, actor, (current) => ({ ...next(current), id: userId }))),
      locationOf,
    );
  }

  async delete(orgId: string, userId: string, ifMatch: string | undefined, actor: Actor): Promise<void> {
    await asScim(() => this.#directory.deleteUser(orgId, userId, ifMatch, actor));
  }
}

function scimUserOf(tagged: Tagged<UserBody>, locationOf: (id: string) => string): ScimUser {
  return toScimUser(tagged.body, locationOf(tagged.body.id), tagged.etag);
}
