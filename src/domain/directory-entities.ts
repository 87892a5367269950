/**
 * The fields of the directory's entities (users, rooms, ids, emails, names), validated one by one
 * with the path of each problem: the import file (directory-file.ts) and the API's bodies obey the
 * same rules. Pure.
 */
import { USER_STATUSES, type UserStatus } from './signatory-rules.ts';

export const ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+$/;
export const MAX_NAME_LENGTH = 255;
export const MAX_EMAIL_LENGTH = 254;
export const MAX_USERNAME_LENGTH = 128;
export const MAX_PASSWORD_LENGTH = 1024;

export interface ImportProblem {
  /** JSON path of the offending value, e.g. `$.organizations[0].users[3].email`. */
  path: string;
  message: string;
}

/** A user's fields as the directory keeps them (the import file's and the API's alike). */
export interface UserFields {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  external: boolean;
  status: UserStatus;
}

/** A user of the import file, with where it stands in the file. */
export interface UserImport extends UserFields {
  path: string;
}

export interface RoomImport {
  id: string;
  name: string;
  /** Replaces the member list; undefined when the file leaves it out (the stored list stays). */
  members: string[] | undefined;
  /** Where each member is listed first: `members[k]` is at `${path}.members[${memberIndexes[k]}]`. */
  memberIndexes: number[];
  path: string;
}

export type Json = Record<string, unknown>;

export class Collector {
  readonly problems: ImportProblem[] = [];
  add(path: string, message: string): void {
    this.problems.push({ path, message });
  }
}

/**
 * A JSON array: a parsed one, or one read element by element from a file
 * (any iterable object: JSON.parse never makes an object with Symbol.iterator).
 */
function isJsonArray(value: unknown): value is Iterable<unknown> {
  return Array.isArray(value) || (typeof value === 'object' && value !== null && Symbol.iterator in value);
}

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !isJsonArray(value);
}

export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (isJsonArray(value)) return 'an array';
  if (typeof value === 'number') return `number ${String(value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${codePointPrefix(JSON.stringify(value) ?? '', 40)}`;
}

/** At most `max` code points of `text`: an echo cut short never splits a character (an emoji) in two. */
export function codePointPrefix(text: string, max: number): string {
  let end = 0;
  let count = 0;
  for (const character of text) {
    if (count === max) break;
    end += character.length;
    count += 1;
  }
  return text.slice(0, end);
}

/** Whether the text holds more than `max` characters, counted as code points (an emoji is one, as JSON Schema's maxLength counts). */
export function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  if (text.length > 2 * max) return true;
  return codePointPrefix(text, max).length < text.length;
}

export function arrayAt(parent: Json, key: string, path: string, problems: Collector): Iterable<unknown> {
  const value = parent[key];
  if (value === undefined) return [];
  if (!isJsonArray(value)) {
    problems.add(`${path}.${key}`, `must be an array, got ${describe(value)}`);
    return [];
  }
  return value;
}

export function idAt(parent: Json, path: string, what: string, problems: Collector): string | undefined {
  const value = parent['id'];
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) {
    problems.add(`${path}.id`, `${what} id must be 1–64 letters, digits, ".", "_" or "-", got ${describe(value)}`);
    return undefined;
  }
  return value;
}

/** A required or optional non-empty string; control characters are refused unless `controls` allows them (passwords). */
export function stringAt(parent: Json, key: string, path: string, max: number, problems: Collector, required: boolean, controls = false): string | undefined {
  const value = parent[key];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value.length === 0 || longerThan(value, max)) {
    problems.add(`${path}.${key}`, `must be a non-empty string of at most ${max} characters, got ${describe(value)}`);
    return undefined;
  }
  if (controls ? !value.isWellFormed() : unprintable(value)) {
    problems.add(`${path}.${key}`, controls ? 'must not contain unpaired surrogates' : 'must not contain control characters or unpaired surrogates');
    return undefined;
  }
  return value;
}

/** Text that cannot be stored faithfully or shown: control characters, unpaired surrogates. */
export function unprintable(value: string): boolean {
  return /\p{Cc}/u.test(value) || !value.isWellFormed();
}

export function nullableNameAt(parent: Json, key: string, path: string, problems: Collector): string | null {
  const value = parent[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || longerThan(value, MAX_NAME_LENGTH)) {
    problems.add(`${path}.${key}`, `must be a string of at most ${MAX_NAME_LENGTH} characters or null, got ${describe(value)}`);
    return null;
  }
  if (unprintable(value)) {
    problems.add(`${path}.${key}`, 'must not contain control characters or unpaired surrogates');
    return null;
  }
  return value;
}

export function booleanAt(parent: Json, key: string, path: string, problems: Collector): boolean | undefined {
  const value = parent[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') {
    problems.add(`${path}.${key}`, `must be true or false, got ${describe(value)}`);
    return undefined;
  }
  return value;
}

export function validateUser(raw: unknown, path: string, problems: Collector): UserImport | undefined {
  if (!isObject(raw)) {
    problems.add(path, `a user must be an object, got ${describe(raw)}`);
    return undefined;
  }
  const id = idAt(raw, path, 'user', problems);
  const firstname = nullableNameAt(raw, 'firstname', path, problems);
  const lastname = nullableNameAt(raw, 'lastname', path, problems);
  let email = stringAt(raw, 'email', path, MAX_EMAIL_LENGTH, problems, true);
  if (email !== undefined && (!EMAIL_PATTERN.test(email) || unprintable(email))) {
    problems.add(`${path}.email`, `must be an email address (local@domain, no spaces), got ${describe(email)}`);
    email = undefined;
  }
  const external = booleanAt(raw, 'external', path, problems) ?? false;
  const status = raw['status'] ?? 'active';
  const known = USER_STATUSES.includes(status as UserStatus);
  if (!known) problems.add(`${path}.status`, `must be ${USER_STATUSES.map((name) => `"${name}"`).join(', ')}, got ${describe(status)}`);
  if (id === undefined || email === undefined || !known) return undefined;
  return { id, firstname, lastname, email, external, status: status as UserStatus, path };
}

export function validateRoom(raw: unknown, path: string, problems: Collector): RoomImport | undefined {
  if (!isObject(raw)) {
    problems.add(path, `a room must be an object, got ${describe(raw)}`);
    return undefined;
  }
  const id = idAt(raw, path, 'room', problems);
  const name = stringAt(raw, 'name', path, MAX_NAME_LENGTH, problems, false) ?? id;
  const members: string[] = [];
  const memberIndexes: number[] = [];
  const seen = new Set<string>();
  const listed = raw['members'] !== undefined;
  let index = 0;
  for (const member of arrayAt(raw, 'members', path, problems)) {
    if (typeof member !== 'string' || !ID_PATTERN.test(member)) {
      problems.add(`${path}.members[${index}]`, `must be a user id, got ${describe(member)}`);
    } else if (!seen.has(member)) {
      seen.add(member);
      members.push(member);
      memberIndexes.push(index);
    }
    index += 1;
  }
  if (id === undefined || name === undefined) return undefined;
  return { id, name, members: listed ? members : undefined, memberIndexes, path };
}
