import type { Kysely } from 'kysely';
import type { ApiTokenTable, Database } from '../db/tables.ts';

/** A token as listed: never its secret or hash. */
export interface TokenRow {
  id: string;
  orgId: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

const LISTED = ['id', 'org_id', 'name', 'created_at', 'last_used_at'] as const;

function toRow(row: Pick<ApiTokenTable, (typeof LISTED)[number]>): TokenRow {
  return { id: row.id, orgId: row.org_id, name: row.name, createdAt: row.created_at, lastUsedAt: row.last_used_at };
}

export async function insertToken(db: Kysely<Database>, row: ApiTokenTable): Promise<void> {
  await db.insertInto('api_tokens').values(row).execute();
}

/** The token whose secret hashes to `hash`, if it exists (a revoked token's row is gone). */
export async function findTokenByHash(db: Kysely<Database>, hash: string): Promise<{ id: string; orgId: string } | undefined> {
  const row = await db.selectFrom('api_tokens').where('secret_hash', '=', hash).select(['id', 'org_id']).executeTakeFirst();
  return row === undefined ? undefined : { id: row.id, orgId: row.org_id };
}

/** Every token, or an organization's, oldest first. */
export async function findTokens(db: Kysely<Database>, orgId?: string): Promise<TokenRow[]> {
  let select = db.selectFrom('api_tokens').select(LISTED);
  if (orgId !== undefined) select = select.where('org_id', '=', orgId);
  return (await select.orderBy('created_at').orderBy('id').execute()).map(toRow);
}

/** Deletes a token; the row it was, or undefined when there was none. */
export async function deleteToken(db: Kysely<Database>, id: string): Promise<TokenRow | undefined> {
  const row = await db.selectFrom('api_tokens').where('id', '=', id).select(LISTED).executeTakeFirst();
  if (row === undefined) return undefined;
  await db.deleteFrom('api_tokens').where('id', '=', id).execute();
  return toRow(row);
}

/** Records that tokens were used at `at` (never moving a time back). */
export async function touchToken(db: Kysely<Database>, id: string, at: string): Promise<void> {
  await db
    .updateTable('api_tokens')
    .set({ last_used_at: at })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
    .execute();
}
