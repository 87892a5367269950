import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { Migrator, type MigrationResultSet } from 'kysely/migration';
import { ConfigError, type Config } from '../config.ts';
import { NodeSqliteDatabase } from './sqlite-driver.ts';
import { MIGRATIONS } from './migrations/index.ts';
import type { Database } from './tables.ts';

export type DialectName = 'sqlite';

/** An open database: the query builder plus what the lifecycle needs. */
export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly dialect: DialectName;
  /** Human description for logs (never includes a password). */
  readonly description: string;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** File name of the embedded database inside SIGNROOM_DATA_DIR. */
export const SQLITE_FILE = 'signroom.sqlite';

/** Opens the configured database (SQLite under the data directory by default). */
export function openDatabase(config: Config): DatabaseHandle {
  if (config.databaseUrl !== undefined) {
    throw new ConfigError('DATABASE_URL', 'PostgreSQL is not supported by this version yet; unset it to use the embedded SQLite database');
  }
  mkdirSync(config.dataDir, { recursive: true });
  const file = path.join(config.dataDir, SQLITE_FILE);
  const native = new DatabaseSync(file, { timeout: 5000 });
  // WAL lets readers run beside the one writer; synchronous=FULL makes every
  // commit durable before it is acknowledged, even across power loss.
  native.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA foreign_keys = ON;
    PRAGMA temp_store = MEMORY;
    PRAGMA cache_size = -65536;
    PRAGMA mmap_size = 268435456;
  `);
  const database = new NodeSqliteDatabase(native);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return {
    db,
    dialect: 'sqlite',
    description: `sqlite:${file}`,
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}

/** Brings the schema up to date; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<Database>): Promise<MigrationResultSet> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
  });
  const result = await migrator.migrateToLatest();
  if (result.error !== undefined) throw result.error;
  return result;
}
