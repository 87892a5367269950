import { Type } from 'typebox';
import { PROBLEMS } from '../errors.ts';

/** RFC 9457 problem details, as every error response carries them. */
export const Problem = Type.Object(
  {
    type: Type.String({ description: 'URI naming the problem type: urn:signroom:problem:<code>' }),
    title: Type.String({ description: 'Short summary of the problem type' }),
    status: Type.Integer({ description: 'HTTP status code' }),
    detail: Type.String({ description: 'What went wrong with this request' }),
    instance: Type.String({ description: 'The request path' }),
    code: Type.Unsafe<string>({ type: 'string', enum: Object.keys(PROBLEMS), description: 'Stable machine-readable code' }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          parameter: Type.String({ description: 'Name of the bad parameter' }),
          message: Type.String({ description: 'Why its value was refused' }),
        }),
        { description: 'Every bad parameter (400 only)' },
      ),
    ),
  },
  { title: 'Problem', description: 'RFC 9457 problem details' },
);

/**
 * A response header as `@fastify/swagger` reads it from `headers` inside a
 * response schema: a JSON schema whose `description` becomes the header's.
 * Fastify neither validates nor serializes response headers, so declaring one
 * changes nothing on the wire. `type` is required (see the plugin's README).
 */
export interface ResponseHeader {
  type: 'string' | 'integer';
  description: string;
  [keyword: string]: unknown;
}

/** `Retry-After` in delta-seconds, as the server sends it (RFC 9110 section 10.2.3). */
export function retryAfterHeader(description: string): ResponseHeader {
  return { type: 'integer', minimum: 0, description };
}

/** The headers the API sends with a problem of each status, wherever it sends that status. */
const PROBLEM_HEADERS: Readonly<Record<number, Readonly<Record<string, ResponseHeader>>>> = {
  401: {
    'WWW-Authenticate': {
      type: 'string',
      enum: ['Basic realm="signroom", charset="UTF-8"'],
      description: 'The HTTP Basic challenge (RFC 7617)',
    },
  },
  429: { 'Retry-After': retryAfterHeader('Seconds until this username may try to log in again') },
  503: { 'Retry-After': retryAfterHeader('Seconds to wait before retrying') },
};

/**
 * One problem response schema: `application/problem+json`, with the given
 * response headers. For a status whose headers differ from the API's usual
 * ones (see problemResponses).
 */
export function problemResponse(status: number, headers?: Readonly<Record<string, ResponseHeader>>) {
  return {
    description: describeStatus(status),
    ...(headers !== undefined ? { headers } : {}),
    content: { 'application/problem+json': { schema: Problem } },
  };
}

/**
 * Response schemas for the given error statuses, all as `application/problem+json`,
 * each with the headers the API sends with it (`WWW-Authenticate` on 401,
 * `Retry-After` on 429 and 503).
 */
export function problemResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((status) => [status, problemResponse(status, PROBLEM_HEADERS[status])]));
}

/**
 * Statuses every route under /admin/api can answer besides its own: the auth
 * hook's 401, 429 and 403 (contract section 5), and the error handler's 500
 * (internal-error) and 503 (service-unavailable: the database is unreachable,
 * with Retry-After), both possible wherever the database or the code is reached.
 */
export const ADMIN_API_STATUSES = [401, 403, 429, 500, 503] as const;

/** problemResponses for a route under /admin/api: its own error statuses plus ADMIN_API_STATUSES. */
export function adminProblemResponses(...statuses: number[]) {
  const all = [...new Set([...statuses, ...ADMIN_API_STATUSES])].sort((a, b) => a - b);
  return problemResponses(...all);
}

function describeStatus(status: number): string {
  const codes = Object.entries(PROBLEMS)
    .filter(([, problem]) => problem.status === status)
    .map(([code]) => code);
  return `Problem details; code: ${codes.join(', ')}`;
}
