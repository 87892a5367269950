/**
 * The directory import file (contract section 6): validated as a whole, every
 * problem reported with its JSON path. Pure: the checks that need the database
 * (members and emails of users imported earlier) are done by the import service
 * on what this returns.
 */

export const ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+$/;
const MAX_NAME_LENGTH = 255;
const MAX_EMAIL_LENGTH = 254;
const MAX_USERNAME_LENGTH = 128;
const MAX_PASSWORD_LENGTH = 1024;

/** A file read twice (validated, then imported) gave something else the second time. */
export class DirectoryFileChanged extends Error {
  constructor() {
    super('the import file changed while it was being imported');
    this.name = 'DirectoryFileChanged';
  }
}

export interface ImportProblem {
  /** JSON path of the offending value, e.g. `$.organizations[0].users[3].email`. */
  path: string;
  message: string;
}

export interface UserImport {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  external: boolean;
  status: 'active' | 'pending';
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

/**
 * An organization of the file. Its users and rooms are not held: each call of
 * users() or rooms() reads them again from the file (or the parsed array),
 * validated, duplicates and invalid entries left out, so an import of a
 * million users keeps only their ids in memory.
 */
export interface OrganizationImport {
  id: string;
  name: string;
  /** Undefined when the file leaves it out: false for a new organization, unchanged otherwise. */
  externalSignatories: boolean | undefined;
  /** How many valid users users() gives. */
  userCount: number;
  /** Every user id the file lists for the organization, even one with problems (members may name them), with where it is listed first. */
  listedUsers: ReadonlyMap<string, number>;
  users(): Iterable<UserImport>;
  rooms(): Iterable<RoomImport>;
}

export interface CredentialImport {
  username: string;
  password: string;
  organizations: '*' | string[];
}

export interface DirectoryFile {
  organizations: OrganizationImport[];
  credentials: CredentialImport[];
}

/**
 * The file's valid parts and every problem found. With problems the file must
 * not be applied, but its valid parts can still be checked against the
 * database, so one run reports everything.
 */
export interface ValidationResult {
  file: DirectoryFile;
  problems: ImportProblem[];
}

type Json = Record<string, unknown>;

class Collector {
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

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !isJsonArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (isJsonArray(value)) return 'an array';
  if (typeof value === 'number') return `number ${String(value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)?.slice(0, 40)}`;
}

function arrayAt(parent: Json, key: string, path: string, problems: Collector): Iterable<unknown> {
  const value = parent[key];
  if (value === undefined) return [];
  if (!isJsonArray(value)) {
    problems.add(`${path}.${key}`, `must be an array, got ${describe(value)}`);
    return [];
  }
  return value;
}

function idAt(parent: Json, path: string, what: string, problems: Collector): string | undefined {
  const value = parent['id'];
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) {
    problems.add(`${path}.id`, `${what} id must be 1–64 letters, digits, ".", "_" or "-", got ${describe(value)}`);
    return undefined;
  }
  return value;
}

/** A required or optional non-empty string; control characters are refused unless `controls` allows them (passwords). */
function stringAt(parent: Json, key: string, path: string, max: number, problems: Collector, required: boolean, controls = false): string | undefined {
  const value = parent[key];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
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
function unprintable(value: string): boolean {
  return /\p{Cc}/u.test(value) || !value.isWellFormed();
}

function nullableNameAt(parent: Json, key: string, path: string, problems: Collector): string | null {
  const value = parent[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > MAX_NAME_LENGTH) {
    problems.add(`${path}.${key}`, `must be a string of at most ${MAX_NAME_LENGTH} characters or null, got ${describe(value)}`);
    return null;
  }
  if (unprintable(value)) {
    problems.add(`${path}.${key}`, 'must not contain control characters or unpaired surrogates');
    return null;
  }
  return value;
}

function booleanAt(parent: Json, key: string, path: string, problems: Collector): boolean | undefined {
  const value = parent[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') {
    problems.add(`${path}.${key}`, `must be true or false, got ${describe(value)}`);
    return undefined;
  }
  return value;
}

function validateUser(raw: unknown, path: string, problems: Collector): UserImport | undefined {
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
  if (status !== 'active' && status !== 'pending') {
    problems.add(`${path}.status`, `must be "active" or "pending", got ${describe(status)}`);
  }
  if (id === undefined || email === undefined || (status !== 'active' && status !== 'pending')) return undefined;
  return { id, firstname, lastname, email, external, status, path };
}

function validateRoom(raw: unknown, path: string, problems: Collector): RoomImport | undefined {
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

/**
 * The entries of `items` that `validate` accepts, skipping the indexes found
 * rejected when the file was validated. Reading the same file again must give
 * the same entries: one that no longer validates means it changed meanwhile.
 */
function* validEntries<T>(
  items: Iterable<unknown>,
  rejected: ReadonlySet<number>,
  pathOf: (index: number) => string,
  validate: (raw: unknown, path: string, problems: Collector) => T | undefined,
): Generator<T> {
  let index = 0;
  for (const raw of items) {
    if (!rejected.has(index)) {
      const entry = validate(raw, pathOf(index), new Collector());
      if (entry === undefined) throw new DirectoryFileChanged();
      yield entry;
    }
    index += 1;
  }
}

function validateOrganization(raw: unknown, path: string, problems: Collector): OrganizationImport | undefined {
  if (!isObject(raw)) {
    problems.add(path, `an organization must be an object, got ${describe(raw)}`);
    return undefined;
  }
  const id = idAt(raw, path, 'organization', problems);
  const name = stringAt(raw, 'name', path, MAX_NAME_LENGTH, problems, false) ?? id;
  let externalSignatories: boolean | undefined;
  const settings = raw['settings'];
  if (settings !== undefined) {
    if (isObject(settings)) externalSignatories = booleanAt(settings, 'externalSignatories', `${path}.settings`, problems);
    else problems.add(`${path}.settings`, `must be an object, got ${describe(settings)}`);
  }

  // Where each id and email is listed first; only these stay in memory.
  const userPath = (index: number) => `${path}.users[${index}]`;
  const indexOfUserId = new Map<string, number>();
  const indexOfEmail = new Map<string, number>();
  const rejectedUsers = new Set<number>();
  const users = arrayAt(raw, 'users', path, problems);
  let index = 0;
  for (const rawUser of users) {
    const rawId = isObject(rawUser) ? rawUser['id'] : undefined;
    const sameId = typeof rawId === 'string' ? indexOfUserId.get(rawId) : undefined;
    if (typeof rawId === 'string' && sameId === undefined) indexOfUserId.set(rawId, index);
    const user = validateUser(rawUser, userPath(index), problems);
    const emailKey = user?.email.toLowerCase();
    const sameEmail = emailKey === undefined ? undefined : indexOfEmail.get(emailKey);
    if (user !== undefined && sameId !== undefined) {
      problems.add(`${user.path}.id`, `duplicate user id "${user.id}" (also at ${userPath(sameId)})`);
    }
    if (user !== undefined && sameEmail !== undefined) {
      problems.add(`${user.path}.email`, `duplicate email "${user.email}", ignoring case (also at ${userPath(sameEmail)}.email)`);
    }
    if (user === undefined || sameId !== undefined || sameEmail !== undefined) rejectedUsers.add(index);
    else indexOfEmail.set(emailKey!, index);
    index += 1;
  }
  const userCount = index - rejectedUsers.size;
  indexOfEmail.clear();

  const roomPath = (index: number) => `${path}.rooms[${index}]`;
  const indexOfRoomId = new Map<string, number>();
  const rejectedRooms = new Set<number>();
  const rooms = arrayAt(raw, 'rooms', path, problems);
  index = 0;
  for (const rawRoom of rooms) {
    const room = validateRoom(rawRoom, roomPath(index), problems);
    const sameId = room === undefined ? undefined : indexOfRoomId.get(room.id);
    if (room !== undefined && sameId !== undefined) {
      problems.add(`${room.path}.id`, `duplicate room id "${room.id}" (also at ${roomPath(sameId)})`);
    }
    if (room === undefined || sameId !== undefined) rejectedRooms.add(index);
    else indexOfRoomId.set(room.id, index);
    index += 1;
  }

  if (id === undefined || name === undefined) return undefined;
  return {
    id,
    name,
    externalSignatories,
    userCount,
    listedUsers: indexOfUserId,
    users: () => validEntries(users, rejectedUsers, userPath, validateUser),
    rooms: () => validEntries(rooms, rejectedRooms, roomPath, validateRoom),
  };
}

function validateCredential(raw: unknown, path: string, problems: Collector): CredentialImport | undefined {
  if (!isObject(raw)) {
    problems.add(path, `a credential must be an object, got ${describe(raw)}`);
    return undefined;
  }
  let username = stringAt(raw, 'username', path, MAX_USERNAME_LENGTH, problems, true);
  if (username !== undefined && (username.includes(':') || /\p{Cc}/u.test(username))) {
    problems.add(`${path}.username`, 'must not contain ":" or control characters (HTTP Basic cannot carry them)');
    username = undefined;
  }
  const password = stringAt(raw, 'password', path, MAX_PASSWORD_LENGTH, problems, true, true);
  const scope = raw['organizations'];
  let organizations: '*' | string[] | undefined;
  if (scope === '*') {
    organizations = '*';
  } else if (Array.isArray(scope)) {
    const ids: string[] = [];
    organizations = ids;
    scope.forEach((orgId, index) => {
      if (typeof orgId === 'string' && ID_PATTERN.test(orgId)) ids.push(orgId);
      else problems.add(`${path}.organizations[${index}]`, `must be an organization id, got ${describe(orgId)}`);
    });
  } else {
    problems.add(`${path}.organizations`, `must be "*" or an array of organization ids, got ${describe(scope)}`);
  }
  if (username === undefined || password === undefined || organizations === undefined) return undefined;
  return { username, password, organizations: organizations === '*' ? '*' : [...new Set(organizations)] };
}

/**
 * Validates a parsed directory file; returns it normalised, or every problem
 * found. Arrays may be any iterable (a file's users and rooms read element by
 * element, see directory/import-file-reader.ts); each is read once here.
 */
export function validateDirectoryFile(data: unknown): ValidationResult {
  const problems = new Collector();
  if (!isObject(data)) {
    problems.add('$', `the file must hold a JSON object, got ${describe(data)}`);
    return { file: { organizations: [], credentials: [] }, problems: problems.problems };
  }
  const organizations: OrganizationImport[] = [];
  const pathOfOrgId = new Map<string, string>();
  let index = 0;
  for (const raw of arrayAt(data, 'organizations', '$', problems)) {
    const path = `$.organizations[${index++}]`;
    const organization = validateOrganization(raw, path, problems);
    if (organization === undefined) continue;
    const sameId = pathOfOrgId.get(organization.id);
    if (sameId !== undefined) {
      problems.add(`${path}.id`, `duplicate organization id "${organization.id}" (also at ${sameId})`);
      continue;
    }
    pathOfOrgId.set(organization.id, path);
    organizations.push(organization);
  }

  const credentials: CredentialImport[] = [];
  const pathOfUsername = new Map<string, string>();
  index = 0;
  for (const raw of arrayAt(data, 'credentials', '$', problems)) {
    const path = `$.credentials[${index++}]`;
    const credential = validateCredential(raw, path, problems);
    if (credential === undefined) continue;
    const sameName = pathOfUsername.get(credential.username);
    if (sameName !== undefined) {
      problems.add(`${path}.username`, `duplicate username "${credential.username}" (also at ${sameName})`);
      continue;
    }
    pathOfUsername.set(credential.username, path);
    credentials.push(credential);
  }

  return { file: { organizations, credentials }, problems: problems.problems };
}
