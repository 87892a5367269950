import type { Filter } from 'scim2-parse-filter';
import { unqualified } from './attributes.ts';
import { ScimError } from './scim-error.ts';
import { parseScimFilter } from './filter-tokens.ts';

/** The longest filter taken: identity providers send one `eq` or two joined by `and`. */
export const MAX_FILTER_LENGTH = 1_000;

/** What a `/Users` filter asks: every condition must hold (`and`). */
export interface UserCondition {
  attribute: 'userName' | 'externalId' | 'id' | 'email' | 'displayName';
  value: string;
}

/** The attributes a filter may test, by their lower-cased SCIM path. */
const ATTRIBUTES: Record<string, UserCondition['attribute']> = {
  username: 'userName',
  externalid: 'externalId',
  id: 'id',
  'emails.value': 'email',
  displayname: 'displayName',
};

/**
 * The conditions of a `/Users` filter (contract section 9): `eq` on userName, externalId, id,
 * emails.value (also as `emails[type eq "work"].value` or `emails[value eq "…"]`) and
 * displayName, joined by `and`. Anything else is 400 `invalidFilter`, naming what is not
 * supported. The grammar is scim2-parse-filter's (its tokens read by filter-tokens.ts).
 */
export function parseUserFilter(filter: string): UserCondition[] {
  return conditionsOf(parseFilter(filter));
}

/** A filter's tree in scim2-parse-filter's grammar; 400 `invalidFilter` when it is too long or cannot be read. */
export function parseFilter(filter: string): Filter {
  if (filter.length > MAX_FILTER_LENGTH) throw new ScimError(400, `The filter is longer than ${MAX_FILTER_LENGTH} characters.`, 'invalidFilter');
  try {
    return parseScimFilter(filter);
  } catch (error) {
    throw new ScimError(400, `The filter cannot be read: ${(error as Error).message}.`, 'invalidFilter');
  }
}

function conditionsOf(node: Filter): UserCondition[] {
  if (node.op === 'and') return node.filters.flatMap(conditionsOf);
  if (node.op === '[]') {
    const path = unqualified(node.attrPath, 'User').toLowerCase();
    const inner = node.valFilter;
    // emails[type eq "work"]: every user's one email is its work email.
    if (path === 'emails' && inner.op === 'eq' && inner.attrPath.toLowerCase() === 'type' && String(inner.compValue).toLowerCase() === 'work') return [];
    if (path === 'emails' && inner.op === 'eq' && inner.attrPath.toLowerCase() === 'value' && typeof inner.compValue === 'string')
      return [{ attribute: 'email', value: inner.compValue }];
    throw unsupported(`${node.attrPath}[…]`);
  }
  if (node.op !== 'eq') throw unsupported(`the operator "${node.op}"`);
  const attribute = ATTRIBUTES[unqualified(node.attrPath, 'User').toLowerCase()];
  if (attribute === undefined) throw unsupported(`the attribute "${node.attrPath}"`);
  if (typeof node.compValue !== 'string') throw new ScimError(400, `"${node.attrPath}" is compared with a string.`, 'invalidFilter');
  return [{ attribute, value: node.compValue }];
}

function unsupported(what: string): ScimError {
  return new ScimError(
    400,
    `The filter uses ${what}, which is not supported: use eq on userName, externalId, id, emails.value or displayName, joined by and.`,
    'invalidFilter',
  );
}
