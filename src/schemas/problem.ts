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

/** Response schemas for the given error statuses, all as `application/problem+json`. */
export function problemResponses(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: describeStatus(status), content: { 'application/problem+json': { schema: Problem } } },
    ]),
  );
}

function describeStatus(status: number): string {
  const codes = Object.entries(PROBLEMS)
    .filter(([, problem]) => problem.status === status)
    .map(([code]) => code);
  return `Problem details; code: ${codes.join(', ')}`;
}
