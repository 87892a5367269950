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
  path: string;
}

export interface OrganizationImport {
  id: string;
  name: string;
  /** Undefined when the file leaves it out: false for a new organization, unchanged otherwise. */
  externalSignatories: boolean | undefined;
  users: UserImport[];
  rooms: RoomImport[];
}

export interface CredentialImport {
  username: string;
  password: string;
  organizations: '*' | string[];
}

/** A member id that is not among the file's users of that organization: the database must know it. */
export interface MemberReference {
  orgId: string;
  userId: string;
  path: string;
}

export interface DirectoryFile {
  organizations: OrganizationImport[];
  credentials: CredentialImport[];
  /** Member ids to resolve against users imported earlier. */
  externalMembers: MemberReference[];
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

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)?.slice(0, 40)}`;
}

function arrayAt(parent: Json, key: string, path: string, problems: Collector): unknown[] {
  const value = parent[key];
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
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

function stringAt(parent: Json, key: string, path: string, max: number, problems: Collector, required: boolean): string | undefined {
  const value = parent[key];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    problems.add(`${path}.${key}`, `must be a non-empty string of at most ${max} characters, got ${describe(value)}`);
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
  const listed = raw['members'] !== undefined;
  arrayAt(raw, 'members', path, problems).forEach((member, index) => {
    if (typeof member !== 'string' || !ID_PATTERN.test(member)) {
      problems.add(`${path}.members[${index}]`, `must be a user id, got ${describe(member)}`);
    } else {
      members.push(member);
    }
  });
  if (id === undefined || name === undefined) return undefined;
  return { id, name, members: listed ? [...new Set(members)] : undefined, path };
}

function validateOrganization(raw: unknown, path: string, problems: Collector, externalMembers: MemberReference[]): OrganizationImport | undefined {
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

  const users: UserImport[] = [];
  const pathOfUserId = new Map<string, string>();
  const pathOfEmail = new Map<string, string>();
  /** Ids of every user the file lists, even one with problems elsewhere: members may name them. */
  const listedUserIds = new Set<string>();
  arrayAt(raw, 'users', path, problems).forEach((rawUser, index) => {
    const userPath = `${path}.users[${index}]`;
    const rawId = isObject(rawUser) ? rawUser['id'] : undefined;
    if (typeof rawId === 'string') listedUserIds.add(rawId);
    const user = validateUser(rawUser, userPath, problems);
    if (user === undefined) return;
    const sameId = pathOfUserId.get(user.id);
    const emailKey = user.email.toLowerCase();
    const sameEmail = pathOfEmail.get(emailKey);
    if (sameId !== undefined) problems.add(`${userPath}.id`, `duplicate user id "${user.id}" (also at ${sameId})`);
    if (sameEmail !== undefined) problems.add(`${userPath}.email`, `duplicate email "${user.email}", ignoring case (also at ${sameEmail})`);
    if (sameId !== undefined || sameEmail !== undefined) return;
    pathOfUserId.set(user.id, userPath);
    pathOfEmail.set(emailKey, `${userPath}.email`);
    users.push(user);
  });

  const rooms: RoomImport[] = [];
  const pathOfRoomId = new Map<string, string>();
  arrayAt(raw, 'rooms', path, problems).forEach((rawRoom, index) => {
    const roomPath = `${path}.rooms[${index}]`;
    const room = validateRoom(rawRoom, roomPath, problems);
    if (room === undefined) return;
    const sameId = pathOfRoomId.get(room.id);
    if (sameId !== undefined) {
      problems.add(`${roomPath}.id`, `duplicate room id "${room.id}" (also at ${sameId})`);
      return;
    }
    pathOfRoomId.set(room.id, roomPath);
    rooms.push(room);
    if (id === undefined || room.members === undefined) return;
    const rawMembers = (rawRoom as Json)['members'] as unknown[];
    for (const member of room.members) {
      if (!listedUserIds.has(member)) {
        externalMembers.push({ orgId: id, userId: member, path: `${roomPath}.members[${rawMembers.indexOf(member)}]` });
      }
    }
  });

  if (id === undefined || name === undefined) return undefined;
  return { id, name, externalSignatories, users, rooms };
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
  const password = stringAt(raw, 'password', path, MAX_PASSWORD_LENGTH, problems, true);
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

/** Validates a parsed directory file; returns it normalised, or every problem found. */
export function validateDirectoryFile(data: unknown): ValidationResult {
  const problems = new Collector();
  if (!isObject(data)) {
    problems.add('$', `the file must hold a JSON object, got ${describe(data)}`);
    return { file: { organizations: [], credentials: [], externalMembers: [] }, problems: problems.problems };
  }
  const externalMembers: MemberReference[] = [];
  const organizations: OrganizationImport[] = [];
  const pathOfOrgId = new Map<string, string>();
  arrayAt(data, 'organizations', '$', problems).forEach((raw, index) => {
    const path = `$.organizations[${index}]`;
    const organization = validateOrganization(raw, path, problems, externalMembers);
    if (organization === undefined) return;
    const sameId = pathOfOrgId.get(organization.id);
    if (sameId !== undefined) {
      problems.add(`${path}.id`, `duplicate organization id "${organization.id}" (also at ${sameId})`);
      return;
    }
    pathOfOrgId.set(organization.id, path);
    organizations.push(organization);
  });

  const credentials: CredentialImport[] = [];
  const pathOfUsername = new Map<string, string>();
  arrayAt(data, 'credentials', '$', problems).forEach((raw, index) => {
    const path = `$.credentials[${index}]`;
    const credential = validateCredential(raw, path, problems);
    if (credential === undefined) return;
    const sameName = pathOfUsername.get(credential.username);
    if (sameName !== undefined) {
      problems.add(`${path}.username`, `duplicate username "${credential.username}" (also at ${sameName})`);
      return;
    }
    pathOfUsername.set(credential.username, path);
    credentials.push(credential);
  });

  return { file: { organizations, credentials, externalMembers }, problems: problems.problems };
}

/** Parses the text of a directory file: invalid JSON is one problem at `$`. */
export function parseDirectoryFile(text: string): ValidationResult {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    return {
      file: { organizations: [], credentials: [], externalMembers: [] },
      problems: [{ path: '$', message: `not valid JSON: ${(error as Error).message}` }],
    };
  }
  return validateDirectoryFile(data);
}
