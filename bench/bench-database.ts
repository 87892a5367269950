/**
 * The database a benchmark runs its server on: SQLite in the server's data
 * directory, or a fresh PostgreSQL database on the server that
 * SIGNROOM_BENCH_POSTGRES_URL names (default: the local one), dropped afterwards.
 */
import pg from 'pg';

export interface BenchDatabase {
  /** Variables for the server's environment (DATABASE_URL for PostgreSQL). */
  env: Record<string, string>;
  drop(): Promise<void>;
}

export async function benchDatabase(dialect: 'sqlite' | 'postgres'): Promise<BenchDatabase> {
  if (dialect === 'sqlite') return { env: {}, drop: async () => undefined };
  const adminUrl = process.env['SIGNROOM_BENCH_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `signroom_bench_${process.pid}`;
  const admin = async (statement: string): Promise<void> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { env: { DATABASE_URL: url.toString() }, drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
