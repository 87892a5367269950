import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/tables.ts';

/** The organizations a credential may act on: some ids, or all of them. */
export type CredentialScope = '*' | readonly string[];

export interface CredentialRow {
  username: string;
  passwordHash: string;
  scope: CredentialScope;
}

/** The credential of a username, or undefined. */
export async function findCredential(db: Kysely<Database>, username: string): Promise<CredentialRow | undefined> {
  const row = await db
    .selectFrom('credentials')
    .select(['username', 'password_hash', 'organizations'])
    .where('username', '=', username)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return { username: row.username, passwordHash: row.password_hash, scope: JSON.parse(row.organizations) as CredentialScope };
}

/** Creates or replaces a credential. */
export async function upsertCredential(
  db: Kysely<Database> | Transaction<Database>,
  credential: CredentialRow,
): Promise<void> {
  const values = {
    username: credential.username,
    password_hash: credential.passwordHash,
    organizations: JSON.stringify(credential.scope),
    updated_at: new Date().toISOString(),
  };
  await db
    .insertInto('credentials')
    .values(values)
    .onConflict((oc) => oc.column('username').doUpdateSet({ ...values }))
    .execute();
}

/** Deletes a credential; returns whether it existed. */
export async function deleteCredential(db: Kysely<Database>, username: string): Promise<boolean> {
  const result = await db.deleteFrom('credentials').where('username', '=', username).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
