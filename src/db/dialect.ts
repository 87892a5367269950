import { PostgresAdapter, type Kysely } from 'kysely';

/** The databases signroom runs on: embedded SQLite, or PostgreSQL via DATABASE_URL. */
export type DialectName = 'sqlite' | 'postgres';

/** Which database a query builder (or transaction) talks to. */
export function dialectOf(db: Kysely<any>): DialectName {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
