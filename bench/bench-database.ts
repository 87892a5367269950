/**
 * The database a benchmark runs its server on: SQLite in the server's data
 * directory, or a fresh PostgreSQL database on the server that
 * SIGNROOM_BENCH_POSTGRES_URL names (default: the local one), dropped afterwards.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
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

/**
 * What a ceiling phase's server C writes to, made while no server holds `database`: a data
 * directory of its own and, on PostgreSQL, a copy of the database (on SQLite the data directory's
 * files are copied instead, but for the generated directory file, and are on disk before any
 * phase is measured).
 */
export async function ceilingCopy(database: BenchDatabase, dataDir: string): Promise<{ dir: string; database: BenchDatabase | undefined }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-c-'));
  const copy = await database.copy();
  if (copy === undefined) {
    cpSync(dataDir, dir, { recursive: true, filter: (source) => path.basename(source) !== 'directory.json' });
    execFileSync('sync');
  }
  return { dir, database: copy };
}

/** Drops the databases and removes the folders given, each step on its own: one failing (logged) leaves the others done. */
export async function cleanUp(databases: (BenchDatabase | undefined)[], dirs: (string | undefined)[], log: (message: string) => void): Promise<void> {
  const steps = [
    ...databases.map((database) => () => database?.drop()),
    ...dirs.map((dir) => () => dir !== undefined && rmSync(dir, { recursive: true, force: true })),
  ];
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      log(`cleanup: ${String(error)}`);
    }
  }
}
