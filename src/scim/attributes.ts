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
