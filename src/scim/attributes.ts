import { ScimError } from './scim-error.ts';

/** The core schemas' URNs, lower-cased with their separator: a path may start with its resource's (RFC 7644 §3.10). */
const CORE_PREFIXES = { User: 'urn:ietf:params:scim:schemas:core:2.0:user:', Group: 'urn:ietf:params:scim:schemas:core:2.0:group:' };

/**
 * A path without its resource's core schema URN in front: `urn:ietf:params:scim:schemas:core:2.0:User:name.givenName`
 * is `name.givenName` for a User. Without a resource (attribute lists, shared by both), either URN.
 */
export function unqualified(path: string, resource?: 'User' | 'Group'): string {
  const lower = path.toLowerCase();
  const prefixes = resource === undefined ? Object.values(CORE_PREFIXES) : [CORE_PREFIXES[resource]];
  const prefix = prefixes.find((candidate) => lower.startsWith(candidate));
  return prefix === undefined ? path : path.slice(prefix.length);
}

/** Attributes every answer keeps, whatever `attributes` or `excludedAttributes` say (RFC 7643 §7 "returned: always"). */
const ALWAYS = new Set(['id', 'schemas']);

/** A comma-separated list of attribute paths, lower-cased; 400 `invalidValue` for a list too long. */
export function attributeList(value: string | undefined, parameter: string): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (value.length > 2_000) throw new ScimError(400, `"${parameter}" is longer than 2,000 characters.`, 'invalidValue');
  return value
    .split(',')
    .map((path) => unqualified(path.trim()).toLowerCase())
    .filter((path) => path !== '');
}

/**
 * A resource with only the `attributes` asked for (RFC 7644 §3.9), or without the
 * `excludedAttributes`: top-level attributes and one level of sub-attributes (`name.givenName`),
 * an extension's by its URN prefix. Names ignore case.
 */
export function projected(resource: Record<string, unknown>, attributes: string[] | undefined, excluded: string[] | undefined): Record<string, unknown> {
  if (attributes !== undefined) {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(resource)) {
      const lower = key.toLowerCase();
      if (ALWAYS.has(lower) || attributes.includes(lower)) {
        out[key] = value;
        continue;
      }
      const names = subAttributes(attributes, lower);
      if (names.length === 0 || typeof value !== 'object' || value === null) continue;
      out[key] = withMembers(value, (sub) => names.includes(sub));
    }
    return out;
  }
  if (excluded !== undefined) {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(resource)) {
      const lower = key.toLowerCase();
      if (!ALWAYS.has(lower) && excluded.includes(lower)) continue;
      const subs = subAttributes(excluded, lower);
      out[key] = subs.length === 0 || typeof value !== 'object' || value === null ? value : withMembers(value, (sub) => !subs.includes(sub));
    }
    return out;
  }
  return resource;
}

/** The sub-attributes of `attribute` (lower-cased) that `paths` name: `name.givenName`, `emails.type`, an extension's `urn:…:User:external`. */
function subAttributes(paths: readonly string[], attribute: string): string[] {
  const prefix = `${attribute}${attribute.startsWith('urn:') ? ':' : '.'}`;
  return paths.filter((path) => path.startsWith(prefix)).map((path) => path.slice(prefix.length));
}

/** A complex value, or each item of a multi-valued one, with only the members (by lower-cased name) `keep` says. */
function withMembers(value: object, keep: (name: string) => boolean): unknown {
  const filtered = (item: unknown) =>
    typeof item === 'object' && item !== null ? Object.fromEntries(Object.entries(item).filter(([sub]) => keep(sub.toLowerCase()))) : item;
  return Array.isArray(value) ? value.map(filtered) : filtered(value);
}

/**
 * A resource's attribute names as its schema spells them, each with the names of its
 * sub-attributes (null: none kept here), for reading what clients send: attribute names ignore
 * case (RFC 7643 §2.1), and a write of `Active` or `Name.GivenName` means `active` and `name.givenName`.
 */
export type AttributeNames = { readonly [name: string]: AttributeNames | null };

function spelled(names: AttributeNames, key: string): string | undefined {
  const lower = key.toLowerCase();
  return Object.keys(names).find((name) => name.toLowerCase() === lower);
}

/**
 * `value` with every attribute name `names` knows spelled as the schema does, in sub-attributes
 * and in each item of a multi-valued one too; names it does not know are left as sent.
 */
export function withSchemaNames(value: unknown, names: AttributeNames): unknown {
  if (Array.isArray(value)) return value.map((item) => withSchemaNames(item, names));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    const name = spelled(names, key);
    // Two spellings of one attribute would leave one of them unread.
    if (name !== undefined && Object.hasOwn(out, name)) throw twice(key, name);
    const subNames = name === undefined ? null : names[name];
    out[name ?? key] = subNames === null || subNames === undefined ? member : withSchemaNames(member, subNames);
  }
  return out;
}

function twice(key: string, name: string): ScimError {
  return new ScimError(400, `"${key}" names the attribute "${name}" given already: attribute names ignore case.`, 'invalidSyntax');
}

/** A path's value filter in brackets, whose quoted strings may hold brackets: one grammar for reading paths and checking them. */
const VALUE_FILTER = String.raw`\[(?:[^[\]"]|"(?:[^"\\]|\\.)*")+\]`;
/** A path without an extension's URN, taken apart: its attribute, value filter and sub-attribute. */
const ATTRIBUTE_PATH = new RegExp(`^([^.[\\]"]+)(${VALUE_FILTER})?(?:\\.([^.[\\]"]+))?$`);

/**
 * A PATCH path with its attribute and sub-attribute spelled as the schema does: `Name.GivenName`
 * is `name.givenName`, `Emails[type eq "work"].Value` is `emails[type eq "work"].value`, an
 * extension's `urn:…:User:External` its `urn:…:User:external` (a filter's own names already
 * ignore case). A path of another shape is left as sent.
 */
export function pathWithSchemaNames(path: string, names: AttributeNames): string {
  const lower = path.toLowerCase();
  const whole = Object.keys(names).find((name) => name.startsWith('urn:') && lower === name.toLowerCase());
  if (whole !== undefined) return whole;
  const extension = Object.keys(names).find((name) => name.startsWith('urn:') && lower.startsWith(`${name.toLowerCase()}:`));
  if (extension !== undefined) {
    const rest = path.slice(extension.length + 1);
    const sub = spelled(names[extension] ?? {}, rest);
    return `${extension}:${sub ?? rest}`;
  }
  const parts = ATTRIBUTE_PATH.exec(path);
  if (parts === null) return path;
  const [, attribute, filter = '', subAttribute] = parts;
  const name = spelled(names, attribute!);
  if (name === undefined) return path;
  const subNames = names[name];
  const sub =
    subAttribute === undefined ? undefined : ((subNames === null || subNames === undefined ? undefined : spelled(subNames, subAttribute)) ?? subAttribute);
  return `${name}${filter}${sub === undefined ? '' : `.${sub}`}`;
}

/**
 * RFC 7644 §3.5.2's PATH: an attribute (an extension's after its URN), an optional value filter
 * in brackets, an optional sub-attribute.
 */
const PATH = new RegExp(`^(?:urn:[^\\s[\\]"]+:)?[A-Za-z$][\\w$-]*(?:${VALUE_FILTER})?(?:\\.[A-Za-z$][\\w$-]*)?$`);

/** 400 `invalidPath` for a PATCH path that is not one by RFC 7644's grammar (an empty one, an unclosed bracket or quote). */
export function checkPathSyntax(path: string, where: string): void {
  if (!PATH.test(path.trim())) throw new ScimError(400, `${where} is not a valid attribute path: ${JSON.stringify(path)}.`, 'invalidPath');
}
