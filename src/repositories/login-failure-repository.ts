import { sql, type Kysely } from 'kysely';
import type { FailureRecord } from '../auth/login-throttle.ts';
import type { Database } from '../db/tables.ts';

/**
 * Records one more failure of a username from a client address in a single atomic statement, so processes failing
 * the same username at once all count: a window older than `windowMs` starts
 * over at 1; reaching `maxFailures` restarts the window, so the lock lasts a
 * whole window from the last failure.
 */
export async function recordLoginFailure(
  db: Kysely<Database>,
  username: string,
  client: string,
  now: number,
  policy: { windowMs: number; maxFailures: number },
): Promise<FailureRecord> {
  const expiredBefore = now - policy.windowMs;
  const row = await db
    .insertInto('login_failures')
    .values({ username, client, failures: 1, window_start: now })
    .onConflict((oc) =>
      oc.columns(['username', 'client']).doUpdateSet({
        failures: sql<number>`case when login_failures.window_start <= ${expiredBefore} then 1 else login_failures.failures + 1 end`,
        window_start: sql<number>`case
          when login_failures.window_start <= ${expiredBefore} then ${now}
          when login_failures.failures + 1 >= ${policy.maxFailures} then ${now}
          else login_failures.window_start end`,
      }),
    )
    .returning(['failures', 'window_start'])
    .executeTakeFirstOrThrow();
  return { failures: Number(row.failures), windowStart: Number(row.window_start) };
}

/** Forgets the failures of a username from one client address (its owner has just signed in from there). */
export async function clearLoginFailures(db: Kysely<Database>, username: string, client: string): Promise<void> {
  await db.deleteFrom('login_failures').where('username', '=', username).where('client', '=', client).execute();
}

/** Forgets failures whose window has passed, so made-up usernames do not pile up. */
export async function purgeLoginFailures(db: Kysely<Database>, olderThan: number): Promise<void> {
  await db.deleteFrom('login_failures').where('window_start', '<', olderThan).execute();
}
