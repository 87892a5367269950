import { scimPatch, type ScimPatchOperation, type ScimResource } from 'scim-patch';
import type { Filter } from 'scim2-parse-filter';
import type { UserBody } from '../schemas/directory.ts';
import { displayName } from '../domain/signatory-rules.ts';
import { isObject } from '../domain/directory-entities.ts';
import { checkPathSyntax, pathWithSchemaNames, unqualified, withSchemaNames, type AttributeNames } from './attributes.ts';
import { ScimError } from './scim-error.ts';
import { parseScimFilter } from './filter-tokens.ts';

/**
 * SCIM Users (RFC 7643 §4.1) as signroom's users (contract section 9), both ways, pure. The
 * directory service validates what they become, as for the REST routes.
 */
export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const SIGNROOM_USER_SCHEMA = 'urn:signroom:params:scim:schemas:extension:2.0:User';
export const ENTERPRISE_USER_SCHEMA = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';

export interface ScimUser {
  schemas: string[];
  id: string;
  externalId?: string;
  userName: string;
  /** Left out when the user has neither name (RFC 7643 §2.5: an empty complex attribute is unassigned). */
  name?: { givenName?: string; familyName?: string };
  displayName: string;
  emails: { value: string; type: 'work'; primary: true }[];
  active: boolean;
  [SIGNROOM_USER_SCHEMA]: { external: boolean };
  meta: { resourceType: 'User'; created: string; lastModified: string; location: string; version: string };
}

/** The SCIM representation of a user; `location` is its URL, `version` its ETag. */
export function toScimUser(user: UserBody, location: string, version: string): ScimUser {
  const name: ScimUser['name'] = {};
  if (user.firstname !== null && user.firstname !== undefined) name.givenName = user.firstname;
  if (user.lastname !== null && user.lastname !== undefined) name.familyName = user.lastname;
  return {
    schemas: [USER_SCHEMA, SIGNROOM_USER_SCHEMA],
    id: user.id,
    ...(user.externalId !== null && user.externalId !== undefined ? { externalId: user.externalId } : {}),
    userName: user.userName ?? user.email,
    ...(Object.keys(name).length > 0 ? { name } : {}),
    displayName: displayName({ firstname: user.firstname ?? null, lastname: user.lastname ?? null, email: user.email }),
    emails: [{ value: user.email, type: 'work', primary: true }],
    active: user.status !== 'suspended',
    [SIGNROOM_USER_SCHEMA]: { external: user.external ?? false },
    meta: { resourceType: 'User', created: user.createdAt, lastModified: user.updatedAt, location, version },
  };
}

/** A boolean as identity providers send it: JSON, or Entra ID's "True"/"False". */
function booleanOf(value: unknown, attribute: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw new ScimError(400, `"${attribute}" must be a boolean.`, 'invalidValue');
}

function stringOf(value: unknown, attribute: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  throw new ScimError(400, `"${attribute}" must be a string.`, 'invalidValue');
}

function objectOf(value: unknown, attribute: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  throw new ScimError(400, `"${attribute}" must be an object.`, 'invalidValue');
}

/** The email a SCIM user gives: the primary one (the last, if several say so), else the first; none: undefined. */
function emailOf(emails: unknown): string | undefined {
  if (emails === undefined || emails === null) return undefined;
  if (!Array.isArray(emails)) throw new ScimError(400, '"emails" must be a list.', 'invalidValue');
  const listed = emails.map((email, k) => objectOf(email, `emails[${k}]`));
  // The last one marked primary: an `add` to `emails` appends the new primary after the old one.
  const chosen = listed.filter((email) => booleanOf(email['primary'], 'emails.primary') === true).at(-1) ?? listed[0];
  return chosen === undefined ? undefined : stringOf(chosen['value'], 'emails.value');
}

/**
 * The directory user a SCIM User body describes, as the REST routes take it (`status` from
 * `active`: false suspends; true activates a suspended user and keeps a pending one pending;
 * absent, as a PUT may leave it or a PATCH remove it, the status stays: a user the identity
 * provider suspended must not come back into the lookups by an attribute left out). `external`
 * from the signroom extension, nested or as `urn:…:User:external` at the top; with
 * `keepExternal` (a PUT), as `current` has it when the body does not give it: identity providers
 * that know nothing of the extension send none, where a patched user without it had it removed.
 * `displayName`, `meta`, attributes not kept and the enterprise extension are ignored.
 */
export function userFromScim(
  body: Record<string, unknown>,
  current: Pick<UserBody, 'status' | 'external'> | undefined,
  options: { keepExternal?: boolean } = {},
): Record<string, unknown> {
  const resource = withSchemaNames(withCoreNamesUnqualified(body), USER_NAMES) as Record<string, unknown>;
  const userName = stringOf(resource['userName'], 'userName');
  if (userName === undefined || userName.trim() === '') throw new ScimError(400, '"userName" is required.', 'invalidValue');
  const name = objectOf(resource['name'], 'name');
  const active = booleanOf(resource['active'], 'active');
  const extension = signroomExtensionOf(resource);
  const currentStatus = current?.status;
  const status =
    active === undefined
      ? (currentStatus ?? 'active')
      : active === false
        ? 'suspended'
        : currentStatus === undefined || currentStatus === 'suspended'
          ? 'active'
          : currentStatus;
  return {
    userName,
    email: emailOf(resource['emails']) ?? userName,
    firstname: stringOf(name['givenName'], 'name.givenName') ?? null,
    lastname: stringOf(name['familyName'], 'name.familyName') ?? null,
    externalId: stringOf(resource['externalId'], 'externalId'),
    external: booleanOf(extension['external'], `${SIGNROOM_USER_SCHEMA}:external`) ?? (options.keepExternal === true ? current?.external : undefined) ?? false,
    status,
  };
}

/**
 * A body with the attributes it names by the core User schema's URN (RFC 7644 §3.10:
 * `urn:…:core:2.0:User:active`, `urn:…:core:2.0:User:name.givenName`) as the plain attributes
 * they are, as pathless PATCH values take them; 400 for one given both ways.
 */
function withCoreNamesUnqualified(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const qualified: [string, string, unknown][] = [];
  for (const [key, value] of Object.entries(body)) {
    const plain = unqualified(key, 'User');
    if (plain === key) out[key] = value;
    else qualified.push([key, plain, value]);
  }
  for (const [key, plain, value] of qualified) {
    const [attribute, sub] = plain.split('.', 2) as [string, string | undefined];
    const given = Object.keys(out).find((name) => name.toLowerCase() === attribute.toLowerCase());
    if (sub === undefined) {
      if (given !== undefined) throw new ScimError(400, `"${key}" names the attribute "${attribute}" given already.`, 'invalidSyntax');
      out[attribute] = value;
      continue;
    }
    const parent = given === undefined ? {} : objectOf(out[given], given);
    if (Object.keys(parent).some((name) => name.toLowerCase() === sub.toLowerCase()))
      throw new ScimError(400, `"${key}" names the attribute "${attribute}.${sub}" given already.`, 'invalidSyntax');
    out[given ?? attribute] = { ...parent, [sub]: value };
  }
  return out;
}

/**
 * The signroom extension's attributes a body gives: its object, and its attributes written out
 * at the top (`urn:…:User:external`, as pathless PATCH values carry them); 400 for one given both ways.
 */
function signroomExtensionOf(resource: Record<string, unknown>): Record<string, unknown> {
  const extension = { ...objectOf(resource[SIGNROOM_USER_SCHEMA], SIGNROOM_USER_SCHEMA) };
  const prefix = `${SIGNROOM_USER_SCHEMA.toLowerCase()}:`;
  for (const [key, value] of Object.entries(resource)) {
    if (!key.toLowerCase().startsWith(prefix)) continue;
    const attribute = pathWithSchemaNames(key, USER_NAMES).slice(prefix.length);
    if (extension[attribute] !== undefined && extension[attribute] !== null)
      throw new ScimError(400, `"${key}" names the attribute "${attribute}" of ${SIGNROOM_USER_SCHEMA} given already.`, 'invalidSyntax');
    extension[attribute] = value;
  }
  return extension;
}

/** RFC 7643's User as a write may name it (sub-attributes of those a user keeps), the signroom extension, and the enterprise one (ignored). */
const USER_NAMES: AttributeNames = {
  ...Object.fromEntries(
    [
      'userName',
      'displayName',
      'nickName',
      'profileUrl',
      'title',
      'userType',
      'preferredLanguage',
      'locale',
      'timezone',
      'active',
      'password',
      'phoneNumbers',
      'ims',
      'photos',
      'addresses',
      'groups',
      'entitlements',
      'roles',
      'x509Certificates',
      'externalId',
      'schemas',
      'id',
      'meta',
    ].map((name) => [name, null]),
  ),
  name: { formatted: null, familyName: null, givenName: null, middleName: null, honorificPrefix: null, honorificSuffix: null },
  emails: { value: null, display: null, type: null, primary: null },
  [SIGNROOM_USER_SCHEMA]: { external: null },
  [ENTERPRISE_USER_SCHEMA]: null,
};
/** The attributes of USER_NAMES with sub-attributes whose values are lists of them. */
const MULTI_VALUED = new Set(['emails']);
const READ_ONLY = new Set(['id', 'meta']);
/** Attributes of RFC 7643's User that a write may name, lower-cased: kept ones, and the rest accepted and ignored. */
const USER_ATTRIBUTES = new Set(
  Object.keys(USER_NAMES)
    .filter((name) => !name.startsWith('urn:'))
    .map((name) => name.toLowerCase())
    .filter((name) => !READ_ONLY.has(name)),
);
/** The attributes a user keeps (the rest of USER_ATTRIBUTES are accepted and ignored). */
const KEPT = new Set(['username', 'name', 'emails', 'active', 'externalid']);

/** Whether a path (or pathless value member) names an attribute the user keeps: an operation on any other changes nothing. */
function isKept(path: string): boolean {
  const lower = path.toLowerCase();
  if (lower.startsWith(SIGNROOM_USER_SCHEMA.toLowerCase())) return true;
  if (lower.startsWith(ENTERPRISE_USER_SCHEMA.toLowerCase())) return false;
  return KEPT.has(lower.split(/[.[]/, 1)[0]!);
}

/** 400 for a path (or pathless value member) that names a read-only or unknown attribute. */
function checkAttribute(path: string): void {
  const lower = path.toLowerCase();
  if (lower.startsWith(ENTERPRISE_USER_SCHEMA.toLowerCase()) || lower.startsWith(SIGNROOM_USER_SCHEMA.toLowerCase())) return;
  const root = lower.split(/[.[]/, 1)[0]!;
  if (READ_ONLY.has(root)) throw new ScimError(400, `"${path}" is read-only.`, 'mutability');
  if (!USER_ATTRIBUTES.has(root)) throw new ScimError(400, `"${path}" is not an attribute of a User.`, 'noTarget');
}

/**
 * A SCIM PATCH (RFC 7644 §3.5.2) of user `userId` read and checked before the user is, as the
 * operations scim-patch is to apply (applyUserPatch), after what real clients send is made what
 * the RFC says: Entra ID's capitalised `op`s, names in any case. A path RFC 7644's grammar does not
 * allow is 400 `invalidPath`; paths to `id` or `meta` 400 `mutability` (a pathless value may
 * repeat the user's own `id`, as Okta's do); unknown attributes 400 `noTarget`; a body that is no
 * PatchOp 400 `invalidSyntax`. Operations on attributes a user does not keep are left out.
 */
export function readUserPatch(body: unknown, userId: string): ScimPatchOperation[] {
  const operations = patchOperations(body).flatMap(withPathsApart);
  for (const operation of operations) {
    if (operation.path !== undefined) {
      checkAttribute(operation.path);
    } else if (operation.op !== 'remove') {
      const value = objectOf((operation as { value?: unknown }).value, 'value');
      for (const key of Object.keys(value)) {
        if (key.toLowerCase() === 'id' && value[key] !== userId) throw new ScimError(400, '"id" is read-only.', 'mutability');
        if (key.toLowerCase() !== 'id') checkAttribute(key);
      }
    }
  }
  // What is not kept is accepted and ignored, before scim-patch: a filter on it would match nothing
  // here (Entra ID's default mapping replaces phoneNumbers[type eq "mobile"].value) and be refused.
  return operations.flatMap((operation): ScimPatchOperation[] => {
    // scim-patch leaves the extension as it is when asked to remove it whole: its attributes one by one.
    if (operation.op === 'remove' && operation.path?.toLowerCase() === SIGNROOM_USER_SCHEMA.toLowerCase())
      return Object.keys(USER_NAMES[SIGNROOM_USER_SCHEMA] ?? {}).map((attribute) => ({ op: 'remove', path: `${SIGNROOM_USER_SCHEMA}:${attribute}` }));
    if (operation.path !== undefined) return isKept(operation.path) ? [operation] : [];
    const value = Object.entries((operation as { value?: Record<string, unknown> }).value ?? {}).filter(([key]) => isKept(key));
    return value.length === 0 ? [] : [{ ...operation, value: Object.fromEntries(value) }];
  });
}

/** Operations read by readUserPatch applied to a user by scim-patch; what it refuses is 400 `invalidValue` (`noTarget` for a filter that selects nothing). */
export function applyUserPatch(current: ScimUser, operations: readonly ScimPatchOperation[]): Record<string, unknown> {
  try {
    // One operation at a time (as scim-patch applies them), each filter on emails matched against the emails as they are then.
    const patched = structuredClone(current) as unknown as ScimResource;
    for (const operation of operations) scimPatch(patched, [withEmailsMatchedIgnoringCase(operation, patched)], { mutateDocument: true });
    return patched as unknown as Record<string, unknown>;
  } catch (error) {
    // A value filter that selects nothing is noTarget (RFC 7644 §3.5.2.3); anything else, an invalid value.
    const scimType = (error as { scimCode?: string }).scimCode === 'noTarget' ? 'noTarget' : 'invalidValue';
    throw new ScimError(400, `The patch cannot be applied: ${(error as Error).message.replace(/^Invalid SCIM Patch: /, '')}`, scimType);
  }
}

/**
 * An operation whose path filters `emails` with the emails it matches ignoring case, named by
 * their own spelling: `type` and `value` are not case-exact (RFC 7643 §4.1.2), but scim-patch
 * compares exactly, so `emails[type eq "Work"]` found no `work` email. Left as sent when the
 * filter matches none (scim-patch then answers as the RFC says) or cannot be read.
 */
function withEmailsMatchedIgnoringCase(operation: ScimPatchOperation, document: ScimResource): ScimPatchOperation {
  const found = operation.path === undefined ? null : /^emails\[(.*)\]((?:\.[^.[\]]+)?)$/s.exec(operation.path);
  if (found === null) return operation;
  let filter: Filter;
  try {
    filter = parseScimFilter(found[1]!);
  } catch {
    return operation;
  }
  const emails = (document as { emails?: unknown }).emails;
  const matched = (Array.isArray(emails) ? emails : []).filter((email) => matchesIgnoringCase(filter, email));
  const values = matched.map((email) => (email as { value?: unknown }).value);
  // Each matched email by its own value, which the path's filter grammar can quote as it is.
  if (values.length === 0 || values.some((value) => typeof value !== 'string' || /["\\]/.test(value))) return operation;
  return { ...operation, path: `emails[${values.map((value) => `value eq "${value as string}"`).join(' or ')}]${found[2]!}` };
}

/** A value filter (RFC 7644 §3.4.2.2) tested on one item, its names and strings compared ignoring case. */
function matchesIgnoringCase(filter: Filter, item: unknown): boolean {
  switch (filter.op) {
    case 'and':
      return filter.filters.every((part) => matchesIgnoringCase(part, item));
    case 'or':
      return filter.filters.some((part) => matchesIgnoringCase(part, item));
    case 'not':
      return !matchesIgnoringCase(filter.filter, item);
    case '[]':
      return false;
    default: {
      const value = memberIgnoringCase(item, filter.attrPath);
      if (filter.op === 'pr') return value !== undefined && value !== null;
      const [have, want] = [value, filter.compValue].map((side) => (typeof side === 'string' ? side.toLowerCase() : side));
      if (filter.op === 'eq') return have === want;
      if (filter.op === 'ne') return have !== want;
      if (typeof have !== 'string' || typeof want !== 'string') return false;
      return filter.op === 'co' ? have.includes(want) : filter.op === 'sw' ? have.startsWith(want) : filter.op === 'ew' ? have.endsWith(want) : false;
    }
  }
}

function memberIgnoringCase(item: unknown, name: string): unknown {
  if (typeof item !== 'object' || item === null) return undefined;
  const lower = name.toLowerCase();
  return Object.entries(item).find(([key]) => key.toLowerCase() === lower)?.[1];
}

/**
 * An operation as scim-patch takes it: names spelled as the schema does; a path without the core
 * URN; a single-valued complex attribute in a pathless value (`name`) as one operation per
 * sub-attribute, so those left out stay; the signroom extension named
 * whole (as a path, or a pathless member) as one operation per attribute of it; and, in a
 * pathless value, each member that is itself a path with a filter (Entra ID's pathless replace
 * carries `emails[type eq "work"].value`) as an operation of its own. scim-patch would otherwise
 * take those names for plain attributes and store them beside the user's, changing nothing.
 */
function withPathsApart(operation: ScimPatchOperation): ScimPatchOperation[] {
  const { op } = operation;
  const value = (operation as { value?: unknown }).value;
  const extensionOps = (extension: unknown) =>
    Object.entries(withSchemaNames(objectOf(extension, SIGNROOM_USER_SCHEMA), USER_NAMES[SIGNROOM_USER_SCHEMA] ?? {}) as object).map(
      ([attribute, attributeValue]) => ({
        op,
        path: `${SIGNROOM_USER_SCHEMA}:${attribute}`,
        value: attributeValue,
      }),
    );
  if (operation.path !== undefined) {
    const path = pathWithSchemaNames(unqualified(operation.path, 'User'), USER_NAMES);
    if (op !== 'remove' && path === SIGNROOM_USER_SCHEMA) return extensionOps(value);
    return [{ ...operation, path, ...(value !== undefined ? { value: withSchemaNames(value, USER_NAMES[path] ?? {}) } : {}) }];
  }
  if (op === 'remove' || typeof value !== 'object' || value === null || Array.isArray(value)) return [operation];
  const plain: Record<string, unknown> = {};
  const apart: ScimPatchOperation[] = [];
  for (const [key, member] of Object.entries(value)) {
    const name = pathWithSchemaNames(unqualified(key, 'User'), USER_NAMES);
    const subNames = USER_NAMES[name];
    if (name === SIGNROOM_USER_SCHEMA) apart.push(...extensionOps(member));
    else if (name.includes('[')) apart.push({ op, path: name, value: member });
    // A single-valued complex attribute's sub-attributes that the value leaves out stay as they are
    // (RFC 7644 §3.5.2.1, §3.5.2.3); a multi-valued one's value is its items (an add appends).
    else if (subNames != null && isObject(member) && !MULTI_VALUED.has(name))
      apart.push(...Object.entries(withSchemaNames(member, subNames) as object).map(([sub, subValue]) => ({ op, path: `${name}.${sub}`, value: subValue })));
    else plain[name] = subNames != null ? withSchemaNames(member, subNames) : member;
  }
  return Object.keys(plain).length === 0 ? apart : [{ ...operation, value: plain }, ...apart];
}

/** A PatchOp message's attribute names (RFC 7644 §3.5.2): `value` is the resource's. */
const PATCH_NAMES: AttributeNames = { schemas: null, Operations: { op: null, path: null, value: null } };

/** The operations of a PatchOp body, each `op` lower-cased; 400 `invalidSyntax` when the body is not one. */
export function patchOperations(body: unknown): ScimPatchOperation[] {
  const operations = (withSchemaNames(objectOf(body, 'body'), PATCH_NAMES) as Record<string, unknown>)['Operations'];
  if (!Array.isArray(operations) || operations.length === 0) throw new ScimError(400, 'A PATCH body has a non-empty "Operations" list.', 'invalidSyntax');
  return operations.map((operation, k) => {
    const fields = objectOf(operation, `Operations[${k}]`);
    const op = typeof fields['op'] === 'string' ? fields['op'].toLowerCase() : undefined;
    if (op !== 'add' && op !== 'replace' && op !== 'remove') throw new ScimError(400, `Operations[${k}].op must be add, replace or remove.`, 'invalidValue');
    const path = fields['path'];
    if (path !== undefined && typeof path !== 'string') throw new ScimError(400, `Operations[${k}].path must be a string.`, 'invalidValue');
    if (path !== undefined) checkPathSyntax(path, `Operations[${k}].path`);
    if (op === 'remove' && path === undefined) throw new ScimError(400, `Operations[${k}]: remove needs a path.`, 'noTarget');
    const value = fields['value'];
    if (op !== 'remove' && value === undefined) throw new ScimError(400, `Operations[${k}]: ${op} needs a value.`, 'invalidValue');
    if (op !== 'remove' && path === undefined && (typeof value !== 'object' || value === null || Array.isArray(value)))
      throw new ScimError(400, `Operations[${k}]: ${op} without a path takes an object of attributes as its value.`, 'invalidValue');
    return { ...fields, op, ...(path !== undefined ? { path: path.trim() } : {}) } as ScimPatchOperation;
  });
}
