/**
 * The directory's writes as requests, pure: RFC 7396 merge patches, the fields of a user, room or
 * organization body by the import file's rules, and everything a write's request shows wrong by
 * itself before the directory is read, so that a 400 names every bad field at once (contract
 * section 8), whichever check finds it: the routes' schemas or these rules.
 */
import {
  Collector,
  ID_PATTERN,
  idAt,
  isObject,
  MAX_NAME_LENGTH,
  stringAt,
  validateUser,
  type ImportProblem,
  type Json,
  type UserFields,
} from './directory-entities.ts';
import { ifMatchTags } from './entity-tags.ts';
import { instantOf } from './instants.ts';

/** RFC 7396: the patch applied to the target; `null` removes a member, objects merge, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/** A user's fields as a body gives them, with SCIM's `userName` and `externalId` beside them. */
export type UserBodyFields = UserFields & { userName: string | null; externalId: string | null };

/** A user body by the import file's rules, its id given apart; undefined when `problems` got any. */
export function readUserBody(body: Json, id: string, problems: Collector): UserBodyFields | undefined {
  const before = problems.problems.length;
  const user = validateUser({ ...body, id }, '', problems);
  const userName = optionalText(body, 'userName', problems);
  const externalId = optionalText(body, 'externalId', problems);
  if (user === undefined || problems.problems.length > before) return undefined;
  const { firstname, lastname, email, external, status } = user;
  return { id: user.id, firstname, lastname, email, external, status, userName, externalId };
}

function optionalText(body: Json, key: string, problems: Collector): string | null {
  if (body[key] === undefined || body[key] === null) return null;
  return stringAt(body, key, '', MAX_NAME_LENGTH, problems, true) ?? null;
}

/**
 * The `name` of an organization or room body; `fallback` (its id) when left out or null, as on
 * creation, so a `PUT` without it and a merge patch's `null` reset it; undefined when it is not a name.
 */
export function readName(body: Json, fallback: string, problems: Collector): string | undefined {
  return body['name'] === undefined || body['name'] === null ? fallback : stringAt(body, 'name', '', MAX_NAME_LENGTH, problems, true);
}

/** An `id` sent in a body must be the resource's own (the one in the URL). */
export function checkSameId(sent: unknown, id: string, problems: Collector): void {
  if (sent !== undefined && sent !== id) problems.add('id', `must be "${id}" (the id in the URL) if sent; ids cannot be changed`);
}

/** An If-Match header is `*` or a list of quoted entity tags (RFC 9110 §13.1.1). */
export function checkIfMatch(header: string | undefined, problems: Collector): void {
  if (ifMatchTags(header) === 'malformed') problems.add('If-Match', 'must be "*" or a list of quoted entity tags');
}

/** A write's request as a route has it, before anything is read: what it writes, the id in its URL (none on a create), its body and If-Match. */
export interface WriteRequest {
  resource: 'organization' | 'user' | 'room' | 'membership';
  method: string;
  id: string | undefined;
  body: unknown;
  ifMatch: string | undefined;
}

/** A resource that passes every rule, for a merge patch to be checked on: what the patch makes of it is what it gets wrong. */
function validResource(resource: WriteRequest['resource'], id: string): Json {
  return resource === 'user' ? { id, firstname: null, lastname: null, email: 'valid@example.invalid', external: false, status: 'active' } : { id, name: id };
}

/**
 * Every problem a write's request shows by itself: its body's fields by the import file's rules
 * (a merge patch's, as it would leave a resource that had none), an id that is not the URL's,
 * an If-Match that is neither `*` nor entity tags. The directory service checks the same again
 * on what it writes; the routes report these with their schemas' findings.
 */
export function writeRequestProblems(request: WriteRequest): ImportProblem[] {
  const problems = new Collector();
  checkIfMatch(request.ifMatch, problems);
  const { body, resource } = request;
  if (!isObject(body) || resource === 'membership' || request.method === 'DELETE') return problems.problems;
  if (request.id !== undefined) checkSameId(body['id'], request.id, problems);
  // An id in the URL that no resource can have is a 404 of the write (as of a read), not this body's problem.
  const id = request.id === undefined ? (typeof body['id'] === 'string' ? body['id'] : 'generated') : ID_PATTERN.test(request.id) ? request.id : 'valid-id';
  const whole = request.method === 'PATCH' ? (mergePatch(validResource(resource, id), body) as Json) : body;
  if (resource === 'user') readUserBody(whole, id, problems);
  else {
    if (request.id === undefined && resource === 'room') idAt({ id }, '', 'room', problems);
    readName(whole, id, problems);
  }
  return problems.problems;
}

/** The audit trail's `since` and `until` as it stores instants; every problem with either. */
export function readInstants(query: { since?: string | undefined; until?: string | undefined }, problems: Collector): { since?: string; until?: string } {
  const read: { since?: string; until?: string } = {};
  for (const key of ['since', 'until'] as const) {
    const value = query[key];
    if (value === undefined) continue;
    const instant = instantOf(value);
    if (instant === undefined) problems.add(key, 'must be an RFC 3339 date-time (2026-11-27T10:00:00Z, an offset or none for UTC) or a date, years 0000–9999');
    else read[key] = instant;
  }
  return read;
}

/** Problems as a 400 names them: each by its field (`settings.externalSignatories`), the body itself as `body`. */
export function problemParameters(problems: readonly ImportProblem[]): { parameter: string; message: string }[] {
  return problems.map((problem) => ({ parameter: problem.path.replace(/^\$?\./, '') || 'body', message: problem.message }));
}
