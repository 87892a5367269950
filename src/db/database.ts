import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { Migrator, type MigrationResultSet } from 'kysely/migration';
import pg from 'pg';
import type { Config, SqliteMemory } from '../config.ts';
import type { DialectName } from './dialect.ts';
import { nameStatementsOf } from './prepared-statements.ts';
import { pipelineTransactionsOf } from './pipelined-transactions.ts';
import { PostgresChangeListener } from './change-listener.ts';
import { NO_CHANGE_SOURCE, type ChangeSource } from '../lib/change-scoped-cache.ts';
import { DatabaseUnavailableError, isDatabaseUnreachable, SchemaNewerError } from './database-errors.ts';
import { NodeSqliteDatabase } from './sqlite-driver.ts';
import { SqliteCommitCounter } from './sqlite-commits.ts';
import { migrationsFor } from './migrations/index.ts';
import type { Database } from './tables.ts';

export type { DialectName } from './dialect.ts';

/** An open database: the query builder plus what the lifecycle needs. */
export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly dialect: DialectName;
  /** Human description for logs (never includes a password). */
  readonly description: string;
  /** Whether another connection committed since: what lets the caches keep reads between requests. */
  readonly changes: ChangeSource;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** File name of the embedded database inside SIGNROOM_DATA_DIR. */
export const SQLITE_FILE = 'signroom.sqlite';

/** Opens the configured database: PostgreSQL when DATABASE_URL is set, else SQLite under the data directory. */
export function openDatabase(config: Config): DatabaseHandle {
  return config.databaseUrl === undefined
    ? openSqlite(config.dataDir, config.sqliteMemory)
    : openPostgres(config.databaseUrl, config.databasePoolSize, config.databaseChangeNotices);
}

function openSqlite(dataDir: string, memory: SqliteMemory): DatabaseHandle {
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, SQLITE_FILE);
  const native = new DatabaseSync(file, { timeout: 5000 });
  // WAL lets readers run beside the one writer; synchronous=FULL makes every
  // commit durable before it is acknowledged, even across power loss.
  native.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA foreign_keys = ON;
    PRAGMA temp_store = MEMORY;
    PRAGMA cache_size = -${Math.ceil(memory.cacheBytes / 1024)};
    PRAGMA mmap_size = ${memory.mmapBytes};
  `);
  const database = new NodeSqliteDatabase(native);
  // Moves when any connection (another process: the CLI) commits; see sqlite-commits.ts.
  // Not while a transaction of this connection is open (an upload awaiting its blob's fsync):
  // the pragma it may fall back to would read inside it, pinning its snapshot, so the token
  // would not move and the transaction's own write would then fail as stale. Undefined then:
  // the caches read through Kysely, which waits for the transaction.
  const commits = new SqliteCommitCounter(native, file);
  // The latest reading, shared by the reads of one request (credential, then organization): it
  // was 2 readings per cached lookup.
  let latest = { at: -Infinity, value: 0 };
  const changes: ChangeSource = {
    token: (asOf) => {
      if (!native.isOpen || native.isTransaction) return undefined;
      if (asOf === undefined || latest.at <= asOf) latest = { at: performance.now(), value: commits.read() };
      return latest.value;
    },
    catchUp: () => undefined,
    about: () => changes,
  };
  // The -shm file is closed after the connection: closing any descriptor of a file drops all of this
  // process's locks on it, SQLite's own included, which must hold while its connection is open.
  return handle(new Kysely<Database>({ dialect: new SqliteDialect({ database }) }), 'sqlite', `sqlite:${file}`, changes, {
    afterClose: async () => commits.close(),
  });
}

/** How long to wait for a PostgreSQL connection before the request fails with 503. */
const CONNECT_TIMEOUT_MS = 5000;

function openPostgres(url: string, poolSize: number, changeNotices: boolean): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    application_name: 'signroom',
    // Queries sent as soon as asked for, answered in order: what lets the writer's transactions
    // send their BEGIN and COMMIT with other statements (pipelined-transactions.ts).
    pipeline: true,
  });
  // An idle connection that breaks (server restart, network) is dropped from the
  // pool and replaced on the next query; unhandled, the event would end the process.
  pool.on('error', () => undefined);
  // A connection that breaks while checked out emits 'error' on its client, which
  // the pool no longer listens to then; the query in flight fails on its own (a
  // 503), and the pool drops the broken client when it is released.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    // The JIT spends longer compiling a first-seen lookup's plan than it saves: the queries here
    // are index walks that gain nothing from it.
    // A SET, not a startup option, which poolers such as PgBouncer refuse. Queued before any
    // query on the new connection; if it fails, the connection works as before, only slower.
    client.query('SET jit = off').catch(() => undefined);
    // A session of its own (see prepared-statements.ts): not behind a pooler in transaction mode, where notices are off.
    if (changeNotices) nameStatementsOf(client);
    pipelineTransactionsOf(client);
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  if (!changeNotices) return handle(db, 'postgres', describePostgresUrl(url), NO_CHANGE_SOURCE);
  const changes = new PostgresChangeListener(url);
  return handle(db, 'postgres', describePostgresUrl(url), changes, { beforeClose: () => changes.close() });
}

function handle(
  db: Kysely<Database>,
  dialect: DialectName,
  description: string,
  changes: ChangeSource,
  hooks: { beforeClose?: () => Promise<void>; afterClose?: () => Promise<void> } = {},
): DatabaseHandle {
  return {
    db,
    dialect,
    description,
    changes,
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await hooks.beforeClose?.();
      await db.destroy();
      await hooks.afterClose?.();
    },
  };
}

/** `postgres://user@host:port/database`: the URL without its password or options. */
export function describePostgresUrl(url: string): string {
  const parsed = new URL(url);
  const user = parsed.username === '' ? '' : `${decodeURIComponent(parsed.username)}@`;
  const port = parsed.port === '' ? '5432' : parsed.port;
  return `postgres://${user}${parsed.hostname}:${port}${parsed.pathname}`;
}

/**
 * Opens the configured database and brings its schema up to date. A database
 * that cannot be reached or migrated is a DatabaseUnavailableError saying why.
 */
export async function openMigratedDatabase(config: Config): Promise<{ database: DatabaseHandle; applied: string[] }> {
  const database = openDatabase(config);
  try {
    const { results = [] } = await migrateToLatest(database);
    const applied = results.filter((result) => result.status === 'Success').map((result) => result.migrationName);
    return { database, applied };
  } catch (error) {
    await database.close();
    const unknown = /previously executed migration (\S+) is missing/.exec(error instanceof Error ? error.message : '')?.[1];
    if (unknown !== undefined) throw new SchemaNewerError(database.description, unknown);
    throw database.dialect === 'postgres' || isDatabaseUnreachable(error) ? new DatabaseUnavailableError(database.description, error) : error;
  }
}

/** Brings the schema up to date; throws with the failing migration's error. */
export async function migrateToLatest(handle: Pick<DatabaseHandle, 'db' | 'dialect'>): Promise<MigrationResultSet> {
  const migrations = migrationsFor(handle.dialect);
  const migrator = new Migrator({
    db: handle.db,
    provider: { getMigrations: async () => migrations },
  });
  const result = await migrator.migrateToLatest();
  if (result.error !== undefined) throw result.error;
  return result;
}
