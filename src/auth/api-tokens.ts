import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import { auditEvent, type Actor } from '../directory/audit.ts';
import { newToken, newTokenId, tokenHash } from '../domain/api-token.ts';
import { insertAuditEvents } from '../repositories/audit-repository.ts';
import { deleteToken, findTokens, insertToken, type TokenRow } from '../repositories/api-token-repository.ts';
import { findOrganization } from '../repositories/directory-repository.ts';

/** A token as `token list --json` prints it (contract section 10). */
export interface ListedToken {
  id: string;
  name: string;
  organizationId: string;
  createdAt: string;
  lastUsedAt: string | null;
}

export function listedToken(row: TokenRow): ListedToken {
  return { id: row.id, name: row.name, organizationId: row.orgId, createdAt: row.createdAt, lastUsedAt: row.lastUsedAt };
}

/** Creates a token for an organization, audited as `token.created`; undefined when the organization does not exist. */
export async function createToken(db: Kysely<Database>, orgId: string, name: string, actor: Actor): Promise<(ListedToken & { token: string }) | undefined> {
  return db.transaction().execute(async (trx) => {
    if ((await findOrganization(trx, orgId)) === undefined) return undefined;
    const token = newToken();
    const row = { id: newTokenId(), org_id: orgId, name, secret_hash: tokenHash(token), created_at: new Date().toISOString(), last_used_at: null };
    await insertToken(trx, row);
    await insertAuditEvents(trx, [auditEvent(orgId, actor, row.created_at, 'token.created', { type: 'token', id: row.id }, { name })]);
    return { token, ...listedToken({ id: row.id, orgId, name, createdAt: row.created_at, lastUsedAt: null }) };
  });
}

export async function listTokens(db: Kysely<Database>, orgId?: string): Promise<ListedToken[] | undefined> {
  if (orgId !== undefined && (await findOrganization(db, orgId)) === undefined) return undefined;
  return (await findTokens(db, orgId)).map(listedToken);
}

/** Revokes a token at once, audited as `token.revoked`; false (nothing recorded) for an unknown id. */
export async function revokeToken(db: Kysely<Database>, id: string, actor: Actor): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const gone = await deleteToken(trx, id);
    if (gone === undefined) return false;
    await insertAuditEvents(trx, [auditEvent(gone.orgId, actor, new Date().toISOString(), 'token.revoked', { type: 'token', id }, { name: gone.name })]);
    return true;
  });
}
