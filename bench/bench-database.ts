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
  /**
   * A second database with what this one holds now (PostgreSQL: from it as a template, so nothing
   * may be connected to it meanwhile); undefined on SQLite, whose database is the data directory's file.
   */
  copy(): Promise<BenchDatabase | undefined>;
}

export async function benchDatabase(dialect: 'sqlite' | 'postgres'): Promise<BenchDatabase> {
  if (dialect === 'sqlite') return { env: {}, drop: async () => undefined, copy: async () => undefined };
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
  const create = async (database: string, template?: string): Promise<BenchDatabase> => {
    await admin(`CREATE DATABASE ${database}${template === undefined ? '' : ` TEMPLATE ${template}`}`);
    const url = new URL(adminUrl);
    url.pathname = `/${database}`;
    return {
      env: { DATABASE_URL: url.toString() },
      drop: () => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
      copy: async () => {
        const copied = await create(`${database}_copy`, database);
        try {
          // CREATE DATABASE … TEMPLATE writes the whole copy to the WAL: its checkpoint now, not during a measured phase.
          await admin('CHECKPOINT');
        } catch (error) {
          await copied.drop();
          throw error;
        }
        return copied;
      },
    };
  };
  return create(name);
}
