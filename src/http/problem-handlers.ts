import { isDatabaseUnreachable } from '../db/database-errors.ts';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEMS, ProblemError, problemBody, type ParameterError, type ProblemCode } from '../errors.ts';
import { parameterErrors } from './validation-messages.ts';
import { ScimError } from '../scim/scim-error.ts';
import { isScimRequest, sendScimError } from './scim-answers.ts';

/** Sends a problem details response. */
export function sendProblem(
  reply: FastifyReply,
  code: ProblemCode,
  detail: string,
  options: { errors?: ParameterError[] | undefined; headers?: Readonly<Record<string, string>> } = {},
): FastifyReply {
  const body = problemBody(code, detail, instanceOf(reply.request), options.errors);
  return reply
    .code(PROBLEMS[code].status)
    .headers({ ...options.headers, 'content-type': 'application/problem+json; charset=utf-8' })
    .send(body);
}

function instanceOf(request: FastifyRequest): string {
  const url = request.url;
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** What the request shows wrong by itself beyond its schemas (set by installRequestChecks). */
    requestProblems?: ParameterError[];
  }
  interface FastifyContextConfig {
    /** The route's checks of a request as a whole, beyond its schemas (see installRequestChecks). */
    requestProblems?: (request: FastifyRequest) => ParameterError[];
  }
}

/**
 * Runs each route's `config.requestProblems` before its schemas validate the request: when they
 * refuse it, the 400 names these problems too (see the error handler), and when they pass, the
 * request is refused with these alone before its handler reads anything. So a 400 names every
 * bad field whichever check finds it (contract section 8), and a malformed If-Match is a 400
 * before an unknown user's 404 (section 5: parameters, then existence).
 */
export function installRequestChecks(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const problems = request.routeOptions.config.requestProblems?.(request);
    if (problems !== undefined && problems.length > 0) request.requestProblems = problems;
  });
  app.addHook('preHandler', async (request) => {
    const problems = request.requestProblems;
    if (problems !== undefined) throw new ProblemError('invalid-parameter', invalidDetail(problems), { errors: problems });
  });
}

/** `errors`, and what the route's own checks found of parameters they do not name. */
function withRequestProblems(request: FastifyRequest, errors: ParameterError[]): ParameterError[] {
  const more = (request.requestProblems ?? []).filter((problem) => !errors.some((found) => found.parameter === problem.parameter));
  return more.length === 0 ? errors : [...errors, ...more];
}

function invalidDetail(errors: readonly ParameterError[]): string {
  return `The request is not valid: ${errors.map((entry) => `${entry.parameter} ${entry.message}`).join('; ')}.`;
}

/** Fastify's own client errors, mapped to our codes. */
const FASTIFY_CODES: Record<string, ProblemCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported-media-type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload-too-large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformed-request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'malformed-request',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'malformed-request',
  FST_ERR_CTP_INVALID_TYPE: 'malformed-request',
};

/**
 * Every error leaves through here as problem details. Client errors keep their
 * message; anything else is a generic 500 whose detail is only in the log.
 */
export function installProblemHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | ProblemError, request, reply) => {
    if (error instanceof ProblemError) {
      // A query's own validator (query-validator.ts) refuses with a problem: the route's checks join it.
      const errors = error.code === 'invalid-parameter' && error.errors !== undefined ? withRequestProblems(request, error.errors) : error.errors;
      const detail = errors === error.errors ? error.message : invalidDetail(errors ?? []);
      return sendProblem(reply, error.code, detail, { errors, headers: error.headers });
    }
    const mapped = error.code !== undefined ? FASTIFY_CODES[error.code] : undefined;
    if (mapped !== undefined) {
      const parameter = error.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' ? 'Content-Length' : 'body';
      return sendProblem(reply, mapped, error.message, { errors: [{ parameter, message: error.message }] });
    }
    if (error.validation !== undefined) {
      const errors = withRequestProblems(request, parameterErrors(error.validation, String(error.validationContext ?? 'body')));
      return sendProblem(reply, 'invalid-parameter', invalidDetail(errors), { errors });
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return sendProblem(reply, 'malformed-request', error.message);
    }
    if (isDatabaseUnreachable(error)) {
      request.log.error({ err: error }, 'database unreachable');
      return sendProblem(reply, 'service-unavailable', 'The database is not reachable right now; try again shortly.', {
        headers: { 'retry-after': '5' },
      });
    }
    request.log.error({ err: error }, 'request failed');
    return sendProblem(
      reply,
      'internal-error',
      'The server could not complete the request. The request id in the x-request-id header identifies it in the log.',
    );
  });

  app.setNotFoundHandler((request, reply) => {
    // The SCIM service's own handler answers what it routes; a path it cannot (a segment longer than any id) reaches this one.
    if (isScimRequest(request.url)) sendScimError(reply, new ScimError(404, `No SCIM resource at ${request.method} ${instanceOf(request)}.`));
    else sendProblem(reply, 'route-not-found', `No resource at ${request.method} ${instanceOf(request)}.`);
  });
}

/** The problem of an id no resource has, by the path parameter that holds it. */
const UNKNOWN_BY_PARAMETER: Readonly<Record<string, ProblemCode>> = {
  organizationId: 'organization-not-found',
  signingRoomId: 'room-not-found',
  roomId: 'room-not-found',
  groupId: 'room-not-found',
  userId: 'user-not-found',
  documentId: 'document-not-found',
};

/**
 * Answers a path parameter holding a NUL character as the unknown id it is (404), before any
 * handler reads it: no id can hold one, and PostgreSQL refuses it in any text it is sent (a 500
 * before). Each route's last preHandler, so authentication (403) and the route's checks of its
 * parameters (400) come first, as for any unknown id. Call before any route is added.
 */
export function refusePathsNamingNothing(app: FastifyInstance): void {
  const refuse = async (request: FastifyRequest): Promise<void> => {
    for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && value.includes('\0'))
        throw new ProblemError(
          UNKNOWN_BY_PARAMETER[name] ?? 'route-not-found',
          `No resource has the ${name} ${JSON.stringify(value)}: no id holds a NUL character.`,
        );
    }
  };
  app.addHook('onRoute', (route) => {
    if (!route.url.includes('/:')) return;
    route.preHandler = [...[route.preHandler ?? []].flat(), refuse];
  });
}

/** The methods a known path answers 405 for when it has no route of them (TRACE too: never echoed, as RFC 9110 9.3.8 allows). */
export const METHODS_ANSWERED_WITH_405 = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE'] as const;

/**
 * Answers 405 with an Allow header for a known path asked with another method.
 * Call before any route is added: it watches routes as they are registered.
 * Register the plugin it returns after the last route. Routes under
 * `skipPrefixes` (the docs UI, which manages its own paths; SCIM, which answers its own errors)
 * are left alone.
 */
export function watchAllowedMethods(app: FastifyInstance, skipPrefixes: readonly string[]): (scope: FastifyInstance) => Promise<void> {
  const allowed = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if ((route.config as { methodNotAllowed?: boolean } | undefined)?.methodNotAllowed === true) return;
    if (skipPrefixes.some((prefix) => route.url.startsWith(prefix))) return;
    const methods = allowed.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) methods.add(method);
    allowed.set(route.url, methods);
  });
  return async (scope) => {
    for (const [url, methods] of allowed) {
      const others = METHODS_ANSWERED_WITH_405.filter((method) => !methods.has(method));
      if (others.length === 0) continue;
      const allow = [...methods].sort().join(', ');
      scope.route({
        method: others,
        url,
        config: { methodNotAllowed: true },
        schema: { hide: true },
        handler: (request, reply) =>
          sendProblem(reply, 'method-not-allowed', `${request.method} is not allowed here; use ${allow}.`, {
            headers: { allow },
          }),
      });
    }
  };
}

/**
 * Errors Fastify meets before routing (a URL that is not valid percent-encoding,
 * a path segment longer than any id): answered as problem details too, or as SCIM
 * errors under the SCIM service's prefix.
 */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (isScimRequest(request.url)) {
    const malformed = error.code === 'FST_ERR_BAD_URL';
    sendScimError(reply, new ScimError(malformed ? 400 : 404, malformed ? 'The URL has a malformed percent-encoding.' : 'No SCIM resource at this URL.'));
  } else if (error.code === 'FST_ERR_BAD_URL') {
    const detail = 'The URL is not valid: it has a malformed percent-encoding.';
    sendProblem(reply, 'malformed-request', detail, { errors: [{ parameter: 'url', message: detail }] });
  } else {
    sendProblem(reply, 'route-not-found', 'No resource at this URL.');
  }
}

/**
 * Errors Node's HTTP parser meets before there is a request (a URL or headers too
 * large, a request that never completes, bytes that are not HTTP): a problem
 * details answer written on the socket, which is then closed.
 */
export function clientErrorHandler(error: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Node hands the bytes it could not parse as a Buffer (Fastify's types say otherwise).
  const overlongUrl = error.code === 'HPE_HEADER_OVERFLOW' && Buffer.isBuffer(error.rawPacket) ? overlongRequestLine(error.rawPacket) : undefined;
  const code: ProblemCode =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? 'request-timeout'
      : overlongUrl !== undefined
        ? 'uri-too-long'
        : error.code === 'HPE_HEADER_OVERFLOW'
          ? 'headers-too-large'
          : 'malformed-request';
  const { status, title } = PROBLEMS[code];
  const detail =
    code === 'malformed-request'
      ? 'The request is not valid HTTP.'
      : overlongUrl !== undefined
        ? `The URL ${overlongUrl} is longer than the server accepts (16 KiB, with the headers); send long values in a request body.`
        : title;
  const body = JSON.stringify(problemBody(code, detail, '/'));
  if (socket.writable) {
    socket.end(
      `HTTP/1.1 ${status} ${title}\r\nConnection: close\r\nContent-Type: application/problem+json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  } else {
    socket.destroy(error);
  }
}

/** Longer than this, a request line that overflowed the header limit is the URL's fault, not the headers'. */
const LONG_REQUEST_LINE = 8 * 1024;

/**
 * When the bytes Node could not fit in its header limit start with a request line that does not
 * end (or ends past LONG_REQUEST_LINE), the URL is too long: its start and length, to name it; else undefined.
 */
function overlongRequestLine(packet: Buffer): string | undefined {
  const end = packet.indexOf('\r\n');
  if (end !== -1 && end < LONG_REQUEST_LINE) return undefined;
  const line = packet.subarray(0, end === -1 ? packet.length : end).toString('latin1');
  const match = /^[A-Z]+ (\S+)/.exec(line);
  // Node keeps only the last chunk it read: a request line that arrived in several has lost its start.
  if (match === null) return end === -1 ? 'whose request line did not end within the limit' : undefined;
  const url = match[1]!;
  return `${url.slice(0, 80).replace(/[^\x21-\x7e]/g, '?')}… (${end === -1 ? 'at least ' : ''}${url.length} characters)`;
}
