import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Collector, type Json } from '../domain/directory-entities.ts';
import { problemParameters, readInstants, writeRequestProblems, type WriteRequest } from '../domain/directory-requests.ts';
import { matchesIfNoneMatch } from '../domain/entity-tags.ts';
import { ProblemError } from '../errors.ts';
import type { Actor } from '../directory/audit.ts';
import type { DirectoryService, Tagged, UserListRequest } from '../directory/directory-service.ts';
import {
  AuditEventPage,
  AuditEventQuery,
  IfMatchHeaders,
  IfNoneMatchHeaders,
  ListQuery,
  MemberPathParams,
  MembershipIfMatchHeaders,
  NotModified,
  Organization,
  OrganizationCreate,
  OrganizationPage,
  OrganizationPatch,
  OrganizationPathParams,
  Room,
  RoomCreate,
  RoomPage,
  RoomPatch,
  RoomPathParams,
  RoomReplace,
  User,
  UserCreate,
  UserListQuery,
  UserPage,
  UserPatch,
  UserPathParams,
  UserReplace,
  withETag,
} from '../schemas/directory.ts';
import { adminProblemResponses } from '../schemas/problem.ts';
import { jsonBodyParser } from './json-bodies.ts';
import { installRequestChecks } from './problem-handlers.ts';

export interface DirectoryRouteOptions {
  directory: DirectoryService;
  /** Path prefix of the API, for Location headers. */
  apiPrefix: string;
}

/** What a PATCH body may be (RFC 7396 says application/merge-patch+json; plain JSON is taken too). */
const MERGE_PATCH_TYPES = ['application/merge-patch+json', 'application/json'];

/** Bodies of the management routes: a few fields each. */
const BODY_LIMIT = 64 * 1024;

const ORG = '/organizations/:organizationId';
const USERS = `${ORG}/users`;
const ROOMS = `${ORG}/rooms`;

/** A write route's request checked as a whole before anything is read (domain/directory-requests.ts): its body, the id in `idParam`, If-Match. */
function checkedWrite(resource: WriteRequest['resource'], idParam?: 'organizationId' | 'userId' | 'roomId') {
  return {
    config: {
      requestProblems: (request: FastifyRequest) =>
        problemParameters(
          writeRequestProblems({
            resource,
            method: request.method,
            id: idParam === undefined ? undefined : (request.params as Record<string, string | undefined>)[idParam],
            body: request.body,
            ifMatch: request.headers['if-match'],
          }),
        ),
    },
  };
}

/** Who acts, as the audit trail names them. */
function actorOf(request: FastifyRequest): Actor {
  return { actor: request.username ?? 'unknown', requestId: request.id };
}

function send<T>(reply: FastifyReply, resource: Tagged<T>, status = 200, location?: string): FastifyReply {
  reply.code(status).header('etag', resource.etag);
  if (location !== undefined) reply.header('location', location);
  return reply.send(resource.body);
}

/** A read's answer: 304 without a body when If-None-Match names the current version, else 200. */
function sendRead<T>(request: FastifyRequest, reply: FastifyReply, resource: Tagged<T>): FastifyReply {
  if (matchesIfNoneMatch(request.headers['if-none-match'], resource.etag)) return reply.code(304).header('etag', resource.etag).send();
  return send(reply, resource);
}

function path(...segments: string[]): string {
  return segments.map(encodeURIComponent).join('/');
}

/** The directory management routes (contract section 8), with ETags and If-Match preconditions. */
export const directoryRoutes: FastifyPluginAsyncTypebox<DirectoryRouteOptions> = async (app, { directory, apiPrefix }) => {
  // RFC 7396 bodies are JSON, parsed as application/json is (an empty body is no body: a route that
  // needs one refuses it as not an object).
  const parseJson = jsonBodyParser(app);
  app.removeContentTypeParser('application/json');
  for (const type of ['application/json', 'application/merge-patch+json'])
    app.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, parseJson);
  const at = (...segments: string[]) => `${apiPrefix}/organizations/${path(...segments)}`;
  const write = { bodyLimit: BODY_LIMIT };
  installRequestChecks(app);

  app.get(
    '/organizations',
    {
      schema: {
        operationId: 'listOrganizations',
        tags: ['directory'],
        summary: 'The organizations the credential covers, by id',
        querystring: ListQuery,
        response: { 200: OrganizationPage, ...adminProblemResponses(400) },
      },
    },
    async (request) => {
      const scope = request.credentialScope;
      const query = request.query as { page: number; size: number };
      return directory.listOrganizations(scope === '*' || scope === undefined ? undefined : scope, query.page, query.size);
    },
  );

  app.post(
    '/organizations',
    {
      ...write,
      // Scope before parameters (contract section 5): 403 before the body is validated.
      preValidation: async (request) => {
        if (request.credentialScope !== '*')
          throw new ProblemError('forbidden', 'Only a credential covering all organizations ("*") may create organizations.');
      },
      ...checkedWrite('organization'),
      schema: {
        operationId: 'createOrganization',
        tags: ['directory'],
        summary: 'Create an organization (credentials covering all organizations only)',
        body: OrganizationCreate,
        response: { 201: withETag(Organization, 'Created', true), ...adminProblemResponses(400, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const created = await directory.createOrganization(request.body, actorOf(request));
      return send(reply, created, 201, at(created.body.id));
    },
  );

  app.get(
    ORG,
    {
      schema: {
        operationId: 'getOrganization',
        tags: ['directory'],
        summary: 'An organization',
        params: OrganizationPathParams,
        headers: IfNoneMatchHeaders,
        response: { 200: withETag(Organization, 'The organization'), 304: NotModified, ...adminProblemResponses(404) },
      },
    },
    async (request, reply) => sendRead(request, reply, await directory.organization(request.params.organizationId)),
  );

  app.patch(
    ORG,
    {
      ...write,
      ...checkedWrite('organization', 'organizationId'),
      schema: {
        operationId: 'patchOrganization',
        consumes: MERGE_PATCH_TYPES,
        tags: ['directory'],
        summary: "Change an organization's name or settings (JSON merge patch)",
        params: OrganizationPathParams,
        headers: IfMatchHeaders,
        body: OrganizationPatch,
        response: { 200: withETag(Organization, 'Changed'), ...adminProblemResponses(400, 404, 412, 413, 415) },
      },
    },
    async (request, reply) =>
      send(reply, await directory.patchOrganization(request.params.organizationId, request.body as Json, request.headers['if-match'], actorOf(request))),
  );

  app.get(
    USERS,
    {
      schema: {
        operationId: 'listUsers',
        tags: ['directory'],
        summary: "A page of the organization's users",
        params: OrganizationPathParams,
        querystring: UserListQuery,
        response: { 200: UserPage, ...adminProblemResponses(400, 404) },
      },
    },
    async (request) => directory.listUsers(request.params.organizationId, request.query as UserListRequest),
  );

  app.post(
    USERS,
    {
      ...write,
      ...checkedWrite('user'),
      schema: {
        operationId: 'createUser',
        tags: ['directory'],
        summary: 'Create a user; its id is generated when absent',
        params: OrganizationPathParams,
        body: UserCreate,
        response: { 201: withETag(User, 'Created', true), ...adminProblemResponses(400, 404, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId } = request.params;
      const created = await directory.createUser(organizationId, request.body, actorOf(request));
      return send(reply, created, 201, at(organizationId, 'users', created.body.id));
    },
  );

  app.get(
    `${USERS}/:userId`,
    {
      schema: {
        operationId: 'getUser',
        tags: ['directory'],
        summary: 'A user',
        params: UserPathParams,
        headers: IfNoneMatchHeaders,
        response: { 200: withETag(User, 'The user'), 304: NotModified, ...adminProblemResponses(404) },
      },
    },
    async (request, reply) => sendRead(request, reply, await directory.user(request.params.organizationId, request.params.userId)),
  );

  app.put(
    `${USERS}/:userId`,
    {
      ...write,
      ...checkedWrite('user', 'userId'),
      schema: {
        operationId: 'replaceUser',
        tags: ['directory'],
        summary: 'Replace a user (absent optional fields reset)',
        params: UserPathParams,
        headers: IfMatchHeaders,
        body: UserReplace,
        response: { 200: withETag(User, 'Replaced'), ...adminProblemResponses(400, 404, 409, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, userId } = request.params;
      return send(reply, await directory.replaceUser(organizationId, userId, request.body as Json, request.headers['if-match'], actorOf(request)));
    },
  );

  app.patch(
    `${USERS}/:userId`,
    {
      ...write,
      ...checkedWrite('user', 'userId'),
      schema: {
        operationId: 'patchUser',
        consumes: MERGE_PATCH_TYPES,
        tags: ['directory'],
        summary: 'Change a user (JSON merge patch); status "suspended" deactivates it',
        params: UserPathParams,
        headers: IfMatchHeaders,
        body: UserPatch,
        response: { 200: withETag(User, 'Changed'), ...adminProblemResponses(400, 404, 409, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, userId } = request.params;
      return send(reply, await directory.patchUser(organizationId, userId, request.body as Json, request.headers['if-match'], actorOf(request)));
    },
  );

  app.delete(
    `${USERS}/:userId`,
    {
      ...checkedWrite('user', 'userId'),
      schema: {
        operationId: 'deleteUser',
        tags: ['directory'],
        summary: 'Delete a user; it leaves every room',
        params: UserPathParams,
        headers: IfMatchHeaders,
        response: { 204: { type: 'null', description: 'Deleted' }, ...adminProblemResponses(400, 404, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, userId } = request.params;
      await directory.deleteUser(organizationId, userId, request.headers['if-match'], actorOf(request));
      return reply.code(204).send(null);
    },
  );

  app.get(
    ROOMS,
    {
      schema: {
        operationId: 'listRooms',
        tags: ['directory'],
        summary: "A page of the organization's signing rooms, by id",
        params: OrganizationPathParams,
        querystring: ListQuery,
        response: { 200: RoomPage, ...adminProblemResponses(400, 404) },
      },
    },
    async (request) => {
      const query = request.query as { page: number; size: number };
      return directory.listRooms(request.params.organizationId, query.page, query.size);
    },
  );

  app.post(
    ROOMS,
    {
      ...write,
      ...checkedWrite('room'),
      schema: {
        operationId: 'createRoom',
        tags: ['directory'],
        summary: 'Create a signing room; its id is generated when absent',
        params: OrganizationPathParams,
        body: RoomCreate,
        response: { 201: withETag(Room, 'Created', true), ...adminProblemResponses(400, 404, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId } = request.params;
      const created = await directory.createRoom(organizationId, request.body, actorOf(request));
      return send(reply, created, 201, at(organizationId, 'rooms', created.body.id));
    },
  );

  app.get(
    `${ROOMS}/:roomId`,
    {
      schema: {
        operationId: 'getRoom',
        tags: ['directory'],
        summary: 'A signing room',
        params: RoomPathParams,
        headers: IfNoneMatchHeaders,
        response: { 200: withETag(Room, 'The signing room'), 304: NotModified, ...adminProblemResponses(404) },
      },
    },
    async (request, reply) => sendRead(request, reply, await directory.room(request.params.organizationId, request.params.roomId)),
  );

  app.put(
    `${ROOMS}/:roomId`,
    {
      ...write,
      ...checkedWrite('room', 'roomId'),
      schema: {
        operationId: 'replaceRoom',
        tags: ['directory'],
        summary: 'Replace a signing room (its name)',
        params: RoomPathParams,
        headers: IfMatchHeaders,
        body: RoomReplace,
        response: { 200: withETag(Room, 'Replaced'), ...adminProblemResponses(400, 404, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, roomId } = request.params;
      return send(reply, await directory.replaceRoom(organizationId, roomId, request.body as Json, request.headers['if-match'], actorOf(request)));
    },
  );

  app.patch(
    `${ROOMS}/:roomId`,
    {
      ...write,
      ...checkedWrite('room', 'roomId'),
      schema: {
        operationId: 'patchRoom',
        consumes: MERGE_PATCH_TYPES,
        tags: ['directory'],
        summary: 'Change a signing room (JSON merge patch)',
        params: RoomPathParams,
        headers: IfMatchHeaders,
        body: RoomPatch,
        response: { 200: withETag(Room, 'Changed'), ...adminProblemResponses(400, 404, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, roomId } = request.params;
      return send(reply, await directory.patchRoom(organizationId, roomId, request.body as Json, request.headers['if-match'], actorOf(request)));
    },
  );

  app.delete(
    `${ROOMS}/:roomId`,
    {
      ...checkedWrite('room', 'roomId'),
      schema: {
        operationId: 'deleteRoom',
        tags: ['directory'],
        summary: 'Delete a signing room (409 while it holds documents)',
        params: RoomPathParams,
        headers: IfMatchHeaders,
        response: { 204: { type: 'null', description: 'Deleted' }, ...adminProblemResponses(400, 404, 409, 412, 413, 415) },
      },
    },
    async (request, reply) => {
      const { organizationId, roomId } = request.params;
      await directory.deleteRoom(organizationId, roomId, request.headers['if-match'], actorOf(request));
      return reply.code(204).send(null);
    },
  );

  app.get(
    `${ROOMS}/:roomId/members`,
    {
      schema: {
        operationId: 'listRoomMembers',
        tags: ['directory'],
        summary: "A page of the signing room's members",
        params: RoomPathParams,
        querystring: UserListQuery,
        response: { 200: UserPage, ...adminProblemResponses(400, 404) },
      },
    },
    async (request) => directory.listUsers(request.params.organizationId, request.query as UserListRequest, request.params.roomId),
  );

  for (const add of [true, false]) {
    app.route({
      method: add ? 'PUT' : 'DELETE',
      url: `${ROOMS}/:roomId/members/:userId`,
      bodyLimit: BODY_LIMIT,
      ...checkedWrite('membership'),
      schema: {
        operationId: add ? 'addRoomMember' : 'removeRoomMember',
        tags: ['directory'],
        summary: add ? 'Add a user to a signing room (idempotent)' : 'Remove a user from a signing room (idempotent)',
        params: MemberPathParams,
        headers: MembershipIfMatchHeaders,
        response: {
          204: { type: 'null', description: add ? 'The user is a member' : 'The user is not a member' },
          ...adminProblemResponses(400, 404, 412, 413, 415),
        },
      },
      handler: async (request, reply) => {
        const { organizationId, roomId, userId } = request.params;
        await directory.setMember(organizationId, roomId, userId, add, request.headers['if-match'], actorOf(request));
        return reply.code(204).send(null);
      },
    });
  }

  app.get(
    `${ORG}/audit-events`,
    {
      config: {
        requestProblems: (request: FastifyRequest) => {
          const problems = new Collector();
          readInstants(request.query as { since?: string; until?: string }, problems);
          return problemParameters(problems.problems);
        },
      },
      schema: {
        operationId: 'listAuditEvents',
        tags: ['audit'],
        summary: "The organization's audit trail, newest first",
        params: OrganizationPathParams,
        querystring: AuditEventQuery,
        response: { 200: AuditEventPage, ...adminProblemResponses(400, 404) },
      },
    },
    async (request) => {
      const query = request.query as { page: number; size: number; action?: string; actor?: string; since?: string; until?: string };
      return directory.auditEvents(
        { orgId: request.params.organizationId, action: query.action, actor: query.actor, since: query.since, until: query.until },
        query.page,
        query.size,
      );
    },
  );
};
