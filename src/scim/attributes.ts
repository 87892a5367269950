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
      // Sub-attributes: `name.givenName`, or an extension's `urn:…:User:external`.
      const separator = lower.startsWith('urn:') ? ':' : '.';
      const names = attributes.filter((path) => path.startsWith(`${lower}${separator}`)).map((path) => path.slice(lower.length + 1));
      if (names.length === 0 || typeof value !== 'object' || value === null) continue;
      const pick = (item: object) => Object.fromEntries(Object.entries(item).filter(([sub]) => names.includes(sub.toLowerCase())));
      out[key] = Array.isArray(value) ? value.map((item: object) => pick(item)) : pick(value);
    }
    return out;
  }
  if (excluded !== undefined) {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(resource)) {
      const lower = key.toLowerCase();
      if (!ALWAYS.has(lower) && excluded.includes(lower)) continue;
      // Sub-attributes, as for `attributes`: `name.givenName`, `emails.type` (of every item), `urn:…:User:external`.
      const separator = lower.startsWith('urn:') ? ':' : '.';
      const subs = excluded.filter((path) => path.startsWith(`${lower}${separator}`)).map((path) => path.slice(lower.length + 1));
      const drop = (item: object) => Object.fromEntries(Object.entries(item).filter(([sub]) => !subs.includes(sub.toLowerCase())));
      out[key] =
        subs.length === 0 || typeof value !== 'object' || value === null
          ? value
          : Array.isArray(value)
            ? value.map((item: unknown) => (typeof item === 'object' && item !== null ? drop(item) : item))
            : drop(value);
    }
    return out;
  }
  return resource;
}
