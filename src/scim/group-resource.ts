import type { Filter } from 'scim2-parse-filter';
import { patchOperations } from './user-resource.ts';
import { ScimError } from './scim-error.ts';
import { unqualified, withSchemaNames, type AttributeNames } from './attributes.ts';
import { parseFilter } from './user-filter.ts';

/**
 * SCIM Groups as signing rooms (contract section 9), pure: `displayName` is the room's name,
 * `members` its members (`value`: a user id; a `display` sent is ignored), `externalId` the
 * identity provider's id. A PATCH is read into the changes it makes rather than applied to the
 * whole member list: a room may have 100,000 members, and a change to one of them reads and
 * writes that one.
 */
export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';

export interface ScimGroup {
  schemas: string[];
  id: string;
  externalId?: string;
  displayName: string;
  members?: { value: string; $ref: string; type: 'User' }[];
  meta: { resourceType: 'Group'; created: string; lastModified: string; location: string; version: string };
}

export interface RoomForGroup {
  id: string;
  name: string;
  externalId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The SCIM representation of a room; `members` left out when undefined (not asked for). */
export function toScimGroup(
  room: RoomForGroup,
  members: readonly string[] | undefined,
  location: string,
  version: string,
  userLocation: (id: string) => string,
): ScimGroup {
  return {
    schemas: [GROUP_SCHEMA],
    id: room.id,
    ...(room.externalId !== null ? { externalId: room.externalId } : {}),
    displayName: room.name,
    ...(members !== undefined ? { members: members.map((value) => ({ value, $ref: userLocation(value), type: 'User' as const })) } : {}),
    meta: { resourceType: 'Group', created: room.createdAt, lastModified: room.updatedAt, location, version },
  };
}

/** What a write of a group changes: name and externalId if given, members added and removed, or the whole member list. */
export interface GroupChange {
  name?: string;
  externalId?: string | null;
  add: string[];
  remove: string[];
  /** The whole new member list (replacing the old). */
  members?: string[];
  /** Every member removed (then `add` added). */
  removeAll?: boolean;
}

/** RFC 7643's Group as a write may name it (names ignore case). */
const MEMBER_NAMES: AttributeNames = { value: null, display: null, $ref: null, type: null };
const GROUP_NAMES: AttributeNames = { displayName: null, members: MEMBER_NAMES, externalId: null, id: null, meta: null, schemas: null };

function memberValues(value: unknown, where: string): string[] {
  const list = Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
  return list.map((member, k) => {
    const id = typeof member === 'object' && member !== null ? (withSchemaNames(member, MEMBER_NAMES) as Record<string, unknown>)['value'] : undefined;
    if (typeof id !== 'string' || id === '') throw new ScimError(400, `${where}[${k}].value must be a user id.`, 'invalidValue');
    return id;
  });
}

function nameValue(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw new ScimError(400, '"displayName" must be a non-empty string.', 'invalidValue');
  return value;
}

function externalIdValue(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'string') throw new ScimError(400, '"externalId" must be a string.', 'invalidValue');
  return value;
}

/** A whole group body (POST, PUT) as the change it makes: `members` absent means none. */
export function groupFromScim(sent: Record<string, unknown>, id?: string): GroupChange {
  const body = withSchemaNames(sent, GROUP_NAMES) as Record<string, unknown>;
  if (id !== undefined && body['id'] !== undefined && body['id'] !== id) throw new ScimError(400, '"id" is read-only.', 'mutability');
  return {
    name: nameValue(body['displayName']),
    externalId: externalIdValue(body['externalId']),
    add: [],
    remove: [],
    members: memberValues(body['members'], 'members'),
  };
}

/** The user id a `members[value eq "…"]` path names (a JSON string's escapes); 400 `invalidValue` for a bad escape. */
function memberFilterValue(quoted: string, k: number): string {
  try {
    return JSON.parse(`"${quoted}"`) as string;
  } catch {
    throw new ScimError(400, `Operations[${k}].path has a bad escape in its member filter.`, 'invalidValue');
  }
}

const MEMBER_FILTER = /^members\[\s*value\s+eq\s+"((?:[^"\\]|\\.)*)"\s*\]$/i;

/**
 * A PatchOp body (RFC 7644 §3.5.2) of a group as the change it makes, in the forms identity
 * providers send: Entra ID's `Add`/`Remove` of `members` with a value list and `Replace` of
 * `displayName`; Okta's pathless `replace` of `{id, displayName}` and `remove` of
 * `members[value eq "…"]`.
 */
export function groupPatch(body: unknown, id: string): GroupChange {
  const change: GroupChange = { add: [], remove: [] };
  const addMembers = (ids: string[]) => {
    change.add.push(...ids);
    change.remove = change.remove.filter((member) => !ids.includes(member));
  };
  const removeMembers = (ids: string[]) => {
    change.remove.push(...ids);
    change.add = change.add.filter((member) => !ids.includes(member));
  };
  for (const [k, operation] of patchOperations(body).entries()) {
    const { op, path } = operation as { op: 'add' | 'replace' | 'remove'; path?: string };
    const value = (operation as { value?: unknown }).value;
    const attribute = path === undefined ? undefined : unqualified(path.trim(), 'Group').toLowerCase();
    if (attribute === undefined) {
      // Without a path, an add or replace (patchOperations refuses a remove) whose value patchOperations made sure is an object.
      for (const [key, member] of Object.entries(value as Record<string, unknown>)) {
        const name = unqualified(key, 'Group').toLowerCase();
        if (name === 'id' && member === id) continue;
        if (name === 'displayname') change.name = nameValue(member);
        else if (name === 'externalid') change.externalId = externalIdValue(member);
        else if (name === 'members' && op === 'add') addMembers(memberValues(member, `Operations[${k}].value.members`));
        else if (name === 'members') {
          change.removeAll = true;
          change.remove = [];
          change.add = memberValues(member, `Operations[${k}].value.members`);
        } else if (name === 'id' || name === 'meta') throw new ScimError(400, `"${key}" is read-only.`, 'mutability');
        else if (name !== 'schemas') throw new ScimError(400, `"${key}" is not an attribute of a Group.`, 'noTarget');
      }
      continue;
    }
    const memberFilter = MEMBER_FILTER.exec(path!.trim());
    if (memberFilter !== null) {
      if (op !== 'remove') throw new ScimError(400, `Operations[${k}]: only remove takes a member filter.`, 'invalidValue');
      removeMembers([memberFilterValue(memberFilter[1]!, k)]);
    } else if (attribute === 'members') {
      if (op === 'add') addMembers(memberValues(value, `Operations[${k}].value`));
      else if (op === 'remove' && value === undefined) {
        change.removeAll = true;
        change.add = [];
        change.remove = [];
      } else if (op === 'remove') removeMembers(memberValues(value, `Operations[${k}].value`));
      else {
        change.removeAll = true;
        change.remove = [];
        change.add = memberValues(value, `Operations[${k}].value`);
      }
    } else if (attribute === 'displayname') {
      if (op === 'remove') throw new ScimError(400, '"displayName" is required.', 'invalidValue');
      change.name = nameValue(value);
    } else if (attribute === 'externalid') {
      change.externalId = op === 'remove' ? null : externalIdValue(value);
    } else if (attribute === 'id' || attribute.startsWith('meta')) {
      throw new ScimError(400, `"${path}" is read-only.`, 'mutability');
    } else {
      throw new ScimError(400, `"${path}" is not an attribute of a Group.`, 'noTarget');
    }
  }
  return change;
}

/** The attributes a `/Groups` filter may test, by their lower-cased SCIM path (`members`: a member's user id). */
const GROUP_FILTER_ATTRIBUTES = { displayname: 'displayName', externalid: 'externalId', id: 'id', members: 'members', 'members.value': 'members' } as const;
type GroupFilterAttribute = (typeof GROUP_FILTER_ATTRIBUTES)[keyof typeof GROUP_FILTER_ATTRIBUTES];

/**
 * What a `/Groups` filter asks: `eq` on displayName (ignoring case), externalId, id or members (a
 * member's user id: Entra ID asks `id eq "…" and members eq "…"` whether a user is still a group's
 * member), joined by `and`.
 */
export function parseGroupFilter(filter: string): { attribute: GroupFilterAttribute; value: string }[] {
  const conditions = (node: Filter): { attribute: GroupFilterAttribute; value: string }[] => {
    if (node.op === 'and') return node.filters.flatMap(conditions);
    const path = node.op === 'eq' ? unqualified(node.attrPath, 'Group').toLowerCase() : undefined;
    const attribute =
      path !== undefined && Object.hasOwn(GROUP_FILTER_ATTRIBUTES, path) ? GROUP_FILTER_ATTRIBUTES[path as keyof typeof GROUP_FILTER_ATTRIBUTES] : undefined;
    if (node.op !== 'eq' || attribute === undefined || typeof node.compValue !== 'string') {
      throw new ScimError(400, 'The filter is not supported: use eq on displayName, externalId, id or members, joined by and.', 'invalidFilter');
    }
    return [{ attribute, value: node.compValue }];
  };
  return conditions(parseFilter(filter));
}
