import { foldedKeys } from '../domain/fold.ts';
import type { UserFields } from '../domain/directory-entities.ts';
import { needsInvitation } from '../domain/signatory-rules.ts';
import type { UserRow } from '../repositories/directory-write-repository.ts';

/**
 * A user as the users table stores it: with its folded keys (src/domain/fold.ts), whether a
 * non-member needs an invitation, the email lower-cased for uniqueness, and the directory version
 * `version` that writes it (0: a first load, which no search index can hold); stamped `at`.
 */
export function userRow(orgId: string, user: UserFields, version: number, at: string): UserRow {
  const keys = foldedKeys(user);
  return {
    org_id: orgId,
    id: user.id,
    firstname: user.firstname,
    lastname: user.lastname,
    email: user.email,
    email_lower: user.email.toLowerCase(),
    external: user.external ? 1 : 0,
    status: user.status,
    needs_invite: needsInvitation(user) ? 1 : 0,
    firstname_key: keys.firstnameKey,
    lastname_key: keys.lastnameKey,
    email_key: keys.emailKey,
    search_key: keys.searchKey,
    changed_in: version,
    created_at: at,
    updated_at: at,
  };
}
