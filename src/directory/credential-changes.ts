import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/tables.ts';
import { insertAuditEvents } from '../repositories/audit-repository.ts';
import { deleteCredential, findCredentialScope, upsertCredential, type CredentialRow, type CredentialScope } from '../repositories/credential-repository.ts';
import { auditEvent, type Actor } from './audit.ts';

/**
 * Credential changes with their audit events (`credential.changed`), in one transaction. A
 * credential belongs to no organization: its event is listed under each organization its scope
 * names, before or after the change, saying whether that organization's access was granted, kept
 * or revoked (never which other organizations the credential covers); a change involving the "*"
 * scope (every organization) is recorded once, under none.
 */

function eventsFor(username: string, before: CredentialScope | undefined, after: CredentialScope | undefined, actor: Actor, at: string) {
  const change = after === undefined ? 'revoked' : before === undefined ? 'created' : 'changed';
  const target = { type: 'credential', id: username };
  if (before === '*' || after === '*') return [auditEvent(null, actor, at, 'credential.changed', target, { username, change })];
  const had = new Set(before ?? []);
  const has = new Set(after ?? []);
  // Each organization learns only what changed for itself, never which others the credential covers.
  return [...new Set([...had, ...has])].map((orgId) =>
    auditEvent(orgId, actor, at, 'credential.changed', target, { username, change, access: !has.has(orgId) ? 'revoked' : had.has(orgId) ? 'kept' : 'granted' }),
  );
}

/** Creates or changes a credential, inside the caller's transaction. */
export async function setCredential(trx: Transaction<Database>, credential: CredentialRow, actor: Actor, at = new Date().toISOString()): Promise<void> {
  const before = await findCredentialScope(trx, credential.username);
  await upsertCredential(trx, credential);
  await insertAuditEvents(trx, eventsFor(credential.username, before, credential.scope, actor, at));
}

/** Deletes a credential; false (and nothing recorded) when there was none. */
export async function revokeCredential(db: Kysely<Database>, username: string, actor: Actor): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await findCredentialScope(trx, username);
    if (before === undefined || !(await deleteCredential(trx, username))) return false;
    await insertAuditEvents(trx, eventsFor(username, before, undefined, actor, new Date().toISOString()));
    return true;
  });
}
