/**
 * The directory import file (contract section 6): validated as a whole, every
 * problem reported with its JSON path. Pure: the checks that need the database
 * (members and emails of users imported earlier) are done by the import service
 * on what this returns.
 */

import {
  arrayAt,
  ID_PATTERN,
  booleanAt,
  Collector,
  describe,
  idAt,
  isObject,
  MAX_NAME_LENGTH,
  MAX_PASSWORD_LENGTH,
  MAX_USERNAME_LENGTH,
  stringAt,
  validateRoom,
  validateUser,
  type ImportProblem,
  type RoomImport,
  type UserImport,
} from './directory-entities.ts';

export { ID_PATTERN, type ImportProblem, type RoomImport, type UserImport } from './directory-entities.ts';

/** A file read twice (validated, then imported) gave something else the second time. */
export class DirectoryFileChanged extends Error {
  constructor() {
    super('the import file changed while it was being imported');
    this.name = 'DirectoryFileChanged';
  }
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
    // No organization with an invalid id is stored, nor imported: a member the file does not list
    // is unknown (the import checks the members of valid ones against the database too).
    if (id === undefined && room?.members !== undefined && sameId === undefined) {
      for (const [k, userId] of room.members.entries()) {
        if (!indexOfUserId.has(userId)) problems.add(`${room.path}.members[${room.memberIndexes[k]}]`, `unknown user id "${userId}" in this organization`);
      }
    }
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
 * Validates each element of the file's `member` array and keeps the first of each key; a later
 * element with the same key is a problem that names where the first one is.
 */
function validateUnique<T>(
  data: Record<string, unknown>,
  member: string,
  problems: Collector,
  validate: (raw: unknown, path: string, problems: Collector) => T | undefined,
  key: { field: string; label: string; of: (item: T) => string },
): T[] {
  const kept: T[] = [];
  const pathOfKey = new Map<string, string>();
  let index = 0;
  for (const raw of arrayAt(data, member, '$', problems)) {
    const path = `$.${member}[${index++}]`;
    const item = validate(raw, path, problems);
    if (item === undefined) continue;
    const value = key.of(item);
    const earlier = pathOfKey.get(value);
    if (earlier !== undefined) {
      problems.add(`${path}.${key.field}`, `duplicate ${key.label} "${value}" (also at ${earlier})`);
      continue;
    }
    pathOfKey.set(value, path);
    kept.push(item);
  }
  return kept;
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
  const organizations = validateUnique(data, 'organizations', problems, validateOrganization, { field: 'id', label: 'organization id', of: (o) => o.id });
  const credentials = validateUnique(data, 'credentials', problems, validateCredential, {
    field: 'username',
    label: 'username',
    of: (credential) => credential.username,
  });
  return { file: { organizations, credentials }, problems: problems.problems };
}
