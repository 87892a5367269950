import { sql, type Kysely, type Transaction } from 'kysely';
import type { FailureRecord } from '../auth/login-throttle.ts';
import type { Database } from '../db/tables.ts';

/** The organizations a credential may act on: some ids, or all of them. */
export type CredentialScope = '*' | readonly string[];

export interface CredentialRow {
  username: string;
  passwordHash: string;
  scope: CredentialScope;
}

export interface LoginState {
  credential: CredentialRow | undefined;
  failures: FailureRecord | undefined;
}

/**
 * What authenticating a username needs, in one round trip: its credential (if
 * any) and its failed logins from this client address (if any; kept for unknown usernames too).
 */
export async function findLoginState(db: Kysely<Database>, username: string, client: string): Promise<LoginState> {
  const { rows } = await sql<{
    username: string | null;
    password_hash: string | null;
    organizations: string | null;
    failures: number | null;
    window_start: number | string | null;
  }>`select c.username, c.password_hash, c.organizations, f.failures, f.window_start
     from (select 1 as one) as probe
     left join credentials as c on c.username = ${username}
     left join login_failures as f on f.username = ${username} and f.client = ${client}`.execute(db);
  const row = rows[0];
  const credential =
    row?.username != null && row.password_hash !== null && row.organizations !== null
      ? { username: row.username, passwordHash: row.password_hash, scope: JSON.parse(row.organizations) as CredentialScope }
      : undefined;
  const failures = row?.failures != null && row.window_start !== null ? { failures: Number(row.failures), windowStart: Number(row.window_start) } : undefined;
  return { credential, failures };
}

/** Creates or replaces a credential. */
export async function upsertCredential(db: Kysely<Database> | Transaction<Database>, credential: CredentialRow): Promise<void> {
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
export async function deleteCredential(db: Kysely<Database> | Transaction<Database>, username: string): Promise<boolean> {
  const result = await db.deleteFrom('credentials').where('username', '=', username).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** The credential's scope, or undefined when there is no such credential. */
export async function findCredentialScope(db: Kysely<Database> | Transaction<Database>, username: string): Promise<CredentialScope | undefined> {
  const row = await db.selectFrom('credentials').select('organizations').where('username', '=', username).executeTakeFirst();
  return row === undefined ? undefined : (JSON.parse(row.organizations) as CredentialScope);
}

/** Whether anything can sign in at all: a credential, or an API token (revoked tokens are deleted). */
export async function anyoneCanSignIn(db: Kysely<Database>): Promise<boolean> {
  const credential = await db.selectFrom('credentials').select('username').limit(1).executeTakeFirst();
  if (credential !== undefined) return true;
  return (await db.selectFrom('api_tokens').select('id').limit(1).executeTakeFirst()) !== undefined;
}
