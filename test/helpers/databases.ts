import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The database this test run uses: `sqlite` or `postgres` (set by test/run.ts). */
export const TEST_DIALECT: 'sqlite' | 'postgres' = process.env['SIGNROOM_TEST_DIALECT'] === 'postgres' ? 'postgres' : 'sqlite';

/** Where test databases are created on PostgreSQL (a maintenance database of the server). */
export const POSTGRES_ADMIN_URL = process.env['SIGNROOM_TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export const POSTGRES_HOW_TO_START =
  'start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start ' +
  '(or point SIGNROOM_TEST_POSTGRES_URL at a server where the user may create databases)';

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL} (${(error as Error).message}); ${POSTGRES_HOW_TO_START}`);
  }
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A database of its own for one test: environment variables for the app, and a way to drop it. */
export interface TestDatabase {
  env: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * A fresh, empty database: nothing for SQLite (the fresh data directory holds
 * it), a newly created PostgreSQL database otherwise.
 */
export async function freshDatabase(dialect: 'sqlite' | 'postgres' = TEST_DIALECT): Promise<TestDatabase> {
  if (dialect === 'sqlite') return { env: {}, drop: async () => undefined };
  const name = `signroom_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    env: { DATABASE_URL: url.toString() },
    drop: () => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** Fails with a message saying how to start PostgreSQL when it cannot be reached. */
export async function requirePostgres(): Promise<void> {
  await admin((client) => client.query('select 1'));
}
