import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { scopeIncludes, type Authenticator } from '../auth/authenticator.ts';
import { isDatabaseUnreachable } from '../db/database-errors.ts';
import { matchesIfNoneMatch } from '../domain/entity-tags.ts';
import { ProblemError } from '../errors.ts';
import type { DirectoryService } from '../directory/directory-service.ts';
import { attributeList, projected } from '../scim/attributes.ts';
import { resourceTypes, schemas, serviceProviderConfig } from '../scim/discovery.ts';
import { ScimError } from '../scim/scim-error.ts';
import type { ScimGroups } from '../scim/scim-groups.ts';
import { scimPaging, type ScimUsers } from '../scim/scim-users.ts';
import { afterPendingReads } from './after-pending-reads.ts';
import { METHODS_ANSWERED_WITH_405 } from './problem-handlers.ts';
import { jsonBodyParser } from './json-bodies.ts';
import { SCIM_JSON, SCIM_PREFIX, sendScimError } from './scim-answers.ts';
import { logAuthOutcome } from './auth-hook.ts';

/** SCIM bodies: a user is well under 1 KiB; a group's member list may be long. */
const BODY_LIMIT = 1024 * 1024;

export interface ScimRouteOptions {
  authenticator: Authenticator;
  directory: DirectoryService;
  users: ScimUsers;
  groups: ScimGroups;
  /** The public base URL (SIGNROOM_PUBLIC_BASE_URL), for `meta.location`; "/" means the request's own host. */
  publicBaseUrl: string;
}

type OrgParams = { organizationId: string };
type UserParams = OrgParams & { userId: string };
type GroupParams = OrgParams & { groupId: string };
type ListQuery = { filter?: string; startIndex?: string; count?: string; attributes?: string; excludedAttributes?: string };

/**
 * The SCIM 2.0 service (contract section 9, RFC 7643/7644), one per organization under
 * SCIM_PREFIX: its own content types (`application/scim+json` answers; that and
 * `application/json` taken), its own errors (RFC 7644 §3.12), API tokens or Basic credentials
 * covering the organization. Not in the OpenAPI document: identity providers speak SCIM, and
 * discover it through /ServiceProviderConfig, /ResourceTypes and /Schemas.
 */
export async function scimRoutes(app: FastifyInstance, options: ScimRouteOptions): Promise<void> {
  const { authenticator, users, groups } = options;
  // An empty body is no body: identity providers send a JSON content type with a DELETE too.
  const parseJson = jsonBodyParser(app);
  app.removeContentTypeParser('application/json');
  for (const type of ['application/json', 'application/scim+json']) app.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, parseJson);

  app.setErrorHandler((error: FastifyError | ScimError, request, reply) => sendScimError(reply, toScimError(error, request)));
  app.setNotFoundHandler((request, reply) => sendScimError(reply, new ScimError(404, `No SCIM resource at ${request.method} ${request.url.split('?')[0]}.`)));

  app.addHook('onRequest', async (request, reply) => {
    request.receivedAt = performance.now();
    await afterPendingReads();
    const outcome = await authenticator.authenticate(request.headers.authorization, request.receivedAt, request.ip);
    logAuthOutcome(request, outcome);
    if (outcome.kind === 'throttled') {
      reply.header('retry-after', String(outcome.retryAfterSeconds));
      return sendScimError(reply, new ScimError(429, `Too many failed logins; try again in ${outcome.retryAfterSeconds} s.`));
    }
    if (outcome.kind === 'busy') {
      reply.header('retry-after', String(outcome.retryAfterSeconds));
      return sendScimError(reply, new ScimError(503, 'The server is busy checking other passwords; try again in a moment.'));
    }
    if (outcome.kind !== 'authenticated') {
      reply.header('www-authenticate', 'Bearer realm="signroom"');
      return sendScimError(
        reply,
        new ScimError(401, 'This SCIM service needs an API token of the organization (Authorization: Bearer) or a Basic credential covering it.'),
      );
    }
    request.username = outcome.username;
    const orgId = (request.params as Partial<OrgParams> | undefined)?.organizationId;
    if (orgId !== undefined && !scopeIncludes(outcome.scope, orgId)) {
      return sendScimError(reply, new ScimError(403, `This token or credential is not allowed to act on organization "${orgId}".`));
    }
    return undefined;
  });
  // A list's parameters each once: a repeated one has no single meaning (it was read as a list before).
  app.addHook('preHandler', async (request) => {
    const query = request.query as Record<string, unknown>;
    for (const name of ['filter', 'startIndex', 'count', 'attributes', 'excludedAttributes']) {
      if (Array.isArray(query[name])) throw new ScimError(400, `"${name}" is given more than once.`, name === 'filter' ? 'invalidFilter' : 'invalidValue');
    }
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  const base = (request: FastifyRequest<{ Params: OrgParams }>) =>
    `${publicBase(options.publicBaseUrl, request)}${SCIM_PREFIX}/${encodeURIComponent(request.params.organizationId)}`;
  const userLocation = (request: FastifyRequest<{ Params: OrgParams }>) => (id: string) => `${base(request)}/Users/${encodeURIComponent(id)}`;
  const actor = (request: FastifyRequest) => ({ actor: request.username ?? 'unknown', requestId: request.id });
  const send = (reply: FastifyReply, status: number, body: object, etag?: string) => {
    if (etag !== undefined) reply.header('etag', etag);
    return reply.code(status).type(SCIM_JSON).send(JSON.stringify(body));
  };
  const hidden = { schema: { hide: true } };
  /** A single resource's read: 304 without a body when If-None-Match names its version (RFC 7644 §3.14), else 200. */
  const sendRead = (request: FastifyRequest, reply: FastifyReply, body: object, etag: string) =>
    matchesIfNoneMatch(request.headers['if-none-match'], etag) ? reply.code(304).header('etag', etag).send() : send(reply, 200, body, etag);

  app.get<{ Params: OrgParams }>('/:organizationId/ServiceProviderConfig', hidden, async (request, reply) => {
    await options.directory.organization(request.params.organizationId);
    return send(reply, 200, serviceProviderConfig(base(request)));
  });
  app.get<{ Params: OrgParams }>('/:organizationId/ResourceTypes', hidden, async (request, reply) => {
    await options.directory.organization(request.params.organizationId);
    return send(reply, 200, resourceTypes(base(request)));
  });
  app.get<{ Params: OrgParams }>('/:organizationId/Schemas', hidden, async (request, reply) => {
    await options.directory.organization(request.params.organizationId);
    return send(reply, 200, schemas(base(request)));
  });
  // Each one alone at the `location` its list gives (RFC 7644 §4): a resource type by its id, a schema by its URN.
  app.get<{ Params: OrgParams & { id: string } }>('/:organizationId/ResourceTypes/:id', hidden, async (request, reply) => {
    await options.directory.organization(request.params.organizationId);
    return send(reply, 200, oneOf(resourceTypes(base(request)).Resources, request.params.id, 'resource type'));
  });
  app.get<{ Params: OrgParams & { id: string } }>('/:organizationId/Schemas/:id', hidden, async (request, reply) => {
    await options.directory.organization(request.params.organizationId);
    return send(reply, 200, oneOf(schemas(base(request)).Resources, request.params.id, 'schema'));
  });

  app.get<{ Params: OrgParams; Querystring: ListQuery }>('/:organizationId/Users', hidden, async (request, reply) => {
    const { filter, attributes, excludedAttributes } = request.query;
    const paging = scimPaging(integerParameter(request.query.startIndex, 'startIndex'), integerParameter(request.query.count, 'count'));
    const list = await users.list(request.params.organizationId, { filter, ...paging }, userLocation(request));
    const only = attributeList(attributes, 'attributes');
    const without = attributeList(excludedAttributes, 'excludedAttributes');
    return send(reply, 200, { ...list, Resources: list.Resources.map((user) => projected({ ...user }, only, without)) });
  });
  app.post<{ Params: OrgParams }>('/:organizationId/Users', hidden, async (request, reply) => {
    const user = await users.create(request.params.organizationId, bodyObject(request.body), actor(request), userLocation(request));
    reply.header('location', user.meta.location);
    return send(reply, 201, projectedFor(request, user), user.meta.version);
  });
  app.get<{ Params: UserParams }>('/:organizationId/Users/:userId', hidden, async (request, reply) => {
    const user = await users.get(request.params.organizationId, request.params.userId, userLocation(request));
    return sendRead(request, reply, projectedFor(request, user), user.meta.version);
  });
  app.put<{ Params: UserParams }>('/:organizationId/Users/:userId', hidden, async (request, reply) => {
    const { organizationId, userId } = request.params;
    const user = await users.replace(organizationId, userId, bodyObject(request.body), ifMatchOf(request), actor(request), userLocation(request));
    return send(reply, 200, projectedFor(request, user), user.meta.version);
  });
  app.patch<{ Params: UserParams }>('/:organizationId/Users/:userId', hidden, async (request, reply) => {
    const { organizationId, userId } = request.params;
    const user = await users.patch(organizationId, userId, bodyObject(request.body), ifMatchOf(request), actor(request), userLocation(request));
    return send(reply, 200, projectedFor(request, user), user.meta.version);
  });
  app.delete<{ Params: UserParams }>('/:organizationId/Users/:userId', hidden, async (request, reply) => {
    await users.delete(request.params.organizationId, request.params.userId, ifMatchOf(request), actor(request));
    return reply.code(204).send();
  });

  const groupLocations = (request: FastifyRequest<{ Params: OrgParams }>) => ({
    group: (id: string) => `${base(request)}/Groups/${encodeURIComponent(id)}`,
    user: userLocation(request),
  });
  app.get<{ Params: OrgParams; Querystring: ListQuery }>('/:organizationId/Groups', hidden, async (request, reply) => {
    const paging = scimPaging(integerParameter(request.query.startIndex, 'startIndex'), integerParameter(request.query.count, 'count'));
    const list = await groups.list(
      request.params.organizationId,
      { filter: request.query.filter, ...paging, members: wantsMembers(request) },
      groupLocations(request),
    );
    return send(reply, 200, { ...list, Resources: list.Resources.map((group) => projectedFor(request, group)) });
  });
  app.post<{ Params: OrgParams }>('/:organizationId/Groups', hidden, async (request, reply) => {
    const group = await groups.create(request.params.organizationId, bodyObject(request.body), actor(request), groupLocations(request));
    reply.header('location', group.meta.location);
    return send(reply, 201, projectedFor(request, group), group.meta.version);
  });
  app.get<{ Params: GroupParams }>('/:organizationId/Groups/:groupId', hidden, async (request, reply) => {
    const group = await groups.get(request.params.organizationId, request.params.groupId, wantsMembers(request), groupLocations(request));
    return sendRead(request, reply, projectedFor(request, group), group.meta.version);
  });
  app.put<{ Params: GroupParams }>('/:organizationId/Groups/:groupId', hidden, async (request, reply) => {
    const { organizationId, groupId } = request.params;
    const group = await groups.replace(organizationId, groupId, bodyObject(request.body), ifMatchOf(request), actor(request), groupLocations(request));
    return send(reply, 200, projectedFor(request, group), group.meta.version);
  });
  app.patch<{ Params: GroupParams }>('/:organizationId/Groups/:groupId', hidden, async (request, reply) => {
    const { organizationId, groupId } = request.params;
    const group = await groups.patch(organizationId, groupId, bodyObject(request.body), ifMatchOf(request), actor(request), groupLocations(request));
    return send(reply, 200, projectedFor(request, group), group.meta.version);
  });
  app.delete<{ Params: GroupParams }>('/:organizationId/Groups/:groupId', hidden, async (request, reply) => {
    await groups.delete(request.params.organizationId, request.params.groupId, ifMatchOf(request), actor(request));
    return reply.code(204).send();
  });
  addNotImplemented(app);
  addMethodsNotAllowed(app);
}

/**
 * SCIM operations this service does not offer, as ServiceProviderConfig says (bulk, and search
 * by POST, which RFC 7644 §3.4.3 makes optional): 501 (RFC 7644 §3.12), where `…/Users/.search`
 * was taken for a user's URL (405) and `…/Bulk` for no resource (404).
 */
function addNotImplemented(app: FastifyInstance): void {
  const instead: Record<string, string> = {
    '/:organizationId/.search': 'Searching with POST .search is not supported: list /Users or /Groups with GET and a filter.',
    '/:organizationId/Users/.search': 'Searching with POST .search is not supported: GET /Users with a filter.',
    '/:organizationId/Groups/.search': 'Searching with POST .search is not supported: GET /Groups with a filter.',
    '/:organizationId/Bulk': 'Bulk operations are not supported (ServiceProviderConfig: bulk.supported is false): send each operation on its own.',
  };
  for (const [url, detail] of Object.entries(instead)) {
    app.post(url, { schema: { hide: true } }, async (_request, reply) => sendScimError(reply, new ScimError(501, detail)));
  }
}

/** The discovery resource with this id (ignoring case, as URNs compare); 404 otherwise. */
function oneOf<T extends { id: string }>(resources: T[], id: string, what: string): T {
  const found = resources.find((resource) => resource.id.toLowerCase() === id.toLowerCase());
  if (found === undefined) throw new ScimError(404, `No ${what} "${id}".`);
  return found;
}

/** The methods of each SCIM path: another is 405 with `Allow`, as a SCIM error. */
const SCIM_PATHS: Record<string, string[]> = {
  '/:organizationId/ServiceProviderConfig': ['GET'],
  '/:organizationId/ResourceTypes': ['GET'],
  '/:organizationId/Schemas': ['GET'],
  '/:organizationId/ResourceTypes/:id': ['GET'],
  '/:organizationId/Schemas/:id': ['GET'],
  '/:organizationId/Users': ['GET', 'POST'],
  '/:organizationId/Users/:userId': ['GET', 'PUT', 'PATCH', 'DELETE'],
  '/:organizationId/Groups': ['GET', 'POST'],
  '/:organizationId/Groups/:groupId': ['GET', 'PUT', 'PATCH', 'DELETE'],
};

function addMethodsNotAllowed(app: FastifyInstance): void {
  for (const [url, methods] of Object.entries(SCIM_PATHS)) {
    const allow = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].sort().join(', ');
    app.route({
      method: METHODS_ANSWERED_WITH_405.filter((method) => !allow.split(', ').includes(method)),
      url,
      schema: { hide: true },
      handler: (request, reply) => {
        reply.header('allow', allow);
        return sendScimError(reply, new ScimError(405, `${request.method} is not allowed here; use ${allow}.`));
      },
    });
  }
}

/** Whether the answer shows a group's members: not when `excludedAttributes` names them, or `attributes` leaves them out. */
function wantsMembers(request: FastifyRequest): boolean {
  const query = request.query as { attributes?: string; excludedAttributes?: string };
  const only = attributeList(query.attributes, 'attributes');
  if (only !== undefined) return only.some((path) => path === 'members' || path.startsWith('members.'));
  return !(attributeList(query.excludedAttributes, 'excludedAttributes') ?? []).includes('members');
}

/** The answer's attributes as `attributes` / `excludedAttributes` of the query ask. */
function projectedFor(request: FastifyRequest, resource: object): object {
  const query = request.query as { attributes?: string; excludedAttributes?: string };
  return projected({ ...resource }, attributeList(query.attributes, 'attributes'), attributeList(query.excludedAttributes, 'excludedAttributes'));
}

function bodyObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ScimError(400, 'The body must be a JSON object.', 'invalidSyntax');
  return body as Record<string, unknown>;
}

function ifMatchOf(request: FastifyRequest): string | undefined {
  const value = request.headers['if-match'];
  return typeof value === 'string' ? value : undefined;
}

/**
 * An integer query parameter (`startIndex`, `count`), of any size (a count above the maximum is
 * capped, a start past the end answers an empty page: scimPaging); 400 `invalidValue` for anything else.
 */
function integerParameter(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^[-+]?\d+$/.test(value)) throw new ScimError(400, `"${name}" must be an integer.`, 'invalidValue');
  return Math.max(-MAX_INT32, Math.min(MAX_INT32, Number(value)));
}

const MAX_INT32 = 2 ** 31 - 1;

function publicBase(configured: string, request: FastifyRequest): string {
  if (configured !== '/' && configured !== '') return configured.replace(/\/$/, '');
  return `${request.protocol}://${request.host}`;
}

/** Any error of a SCIM request as a SCIM error: Fastify's own (bodies, content types) included. */
function toScimError(error: FastifyError | ScimError, request: FastifyRequest): ScimError {
  if (error instanceof ScimError) return error;
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ScimError(413, `The body is larger than ${BODY_LIMIT} bytes.`);
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new ScimError(415, 'Bodies are application/scim+json or application/json.');
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY')
    return new ScimError(400, 'The body is not valid JSON.', 'invalidSyntax');
  if (error instanceof ProblemError && error.code === 'malformed-request') return new ScimError(400, error.message, 'invalidSyntax');
  if (isDatabaseUnreachable(error)) {
    request.log.error({ err: error }, 'database unreachable');
    return new ScimError(503, 'The database is not reachable right now; try again shortly.');
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) return new ScimError(error.statusCode, error.message);
  // The directory service's problems (404 of an organization, 412, 503) keep their status.
  const status = (error as { statusCode?: number }).statusCode;
  if (status !== undefined && status >= 400 && status < 600 && status !== 500) return new ScimError(status, error.message);
  request.log.error({ err: error }, 'request failed');
  return new ScimError(500, 'The server could not complete the request. The request id in the x-request-id header identifies it in the log.');
}
