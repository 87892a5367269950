import { sql, type Expression, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import { dialectOf, type DialectName } from './dialect.ts';
import type { Database } from './tables.ts';

/**
 * The SQL that differs between SQLite and PostgreSQL, in one place. Keys are
 * folded in code (src/domain/fold.ts) and compared byte-wise on both, so these
 * functions only choose the spelling and the index.
 */

/** How many search terms are tested as direct conditions before the rest go through one array parameter. */
const DIRECT_TERMS = 4;

/**
 * True when every term is a substring of `column` (binary, case-sensitive: both
 * sides are already folded). Beyond a few terms they are passed as one array
 * parameter, so a 10,000-character query with thousands of terms stays one bound
 * parameter and a shallow expression. Terms must not contain U+0000 (see hasNul).
 */
export function containsAllTerms(dialect: DialectName, column: Expression<string>, terms: readonly string[]): RawBuilder<SqlBool>[] {
  const position = dialect === 'postgres' ? 'strpos' : 'instr';
  const direct = terms.slice(0, DIRECT_TERMS).map((term) => sql<SqlBool>`${sql.raw(position)}(${column}, ${term}) > 0`);
  const rest = terms.slice(DIRECT_TERMS);
  if (rest.length === 0) return direct;
  const missing =
    dialect === 'postgres'
      ? sql<SqlBool>`not exists (select 1 from unnest(${rest}::text[]) as term(value) where strpos(${column}, term.value) = 0)`
      : sql<SqlBool>`not exists (select 1 from json_each(${JSON.stringify(rest)}) as term where instr(${column}, term.value) = 0)`;
  return [...direct, missing];
}

/**
 * Whether a term contains U+0000. Stored keys never do, so such a term matches
 * nothing; PostgreSQL cannot even take it as a text parameter, and it would end
 * an FTS5 query string, so it is ruled out before any SQL is built.
 */
export function hasNul(term: string): boolean {
  return term.includes('\0');
}

/** The terms a trigram index can look up: three characters (code points) or more. */
export function indexableTerms(terms: readonly string[]): string[] {
  return terms.filter((term) => [...term].length >= 3);
}

/**
 * True when the user is among the trigram index's matches of every term. On
 * SQLite each term is quoted as an FTS5 phrase over `users_search`; on
 * PostgreSQL it is a `LIKE '%term%'` that the pg_trgm GIN index answers, with
 * `%`, `_` and `\` escaped. No character has a special meaning either way. Call
 * only with indexable terms; the exact substring check stays in force beside it.
 */
export function inSearchIndex(
  dialect: DialectName,
  user: { seq: Expression<number>; searchKey: Expression<string> },
  terms: readonly string[],
): RawBuilder<SqlBool> {
  if (dialect === 'postgres') {
    const likes = terms.map((term) => sql<SqlBool>`${user.searchKey} like ${`%${escapeLike(term)}%`}`);
    return sql<SqlBool>`(${sql.join(likes, sql` and `)})`;
  }
  const query = terms.map((term) => `"${term.replaceAll('"', '""')}"`).join(' AND ');
  return sql<SqlBool>`${user.seq} in (select rowid from users_search where users_search match ${query})`;
}

/** A LIKE pattern that matches `text` literally (PostgreSQL's default escape character is `\`). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (character) => `\\${character}`);
}

/**
 * The column as an expression the planner cannot use an index for (SQLite's
 * unary plus; a no-op concatenation on PostgreSQL), so that a search-index
 * condition beside it drives the query.
 */
export function notIndexed(dialect: DialectName, column: Expression<string>): RawBuilder<string> {
  return dialect === 'postgres' ? sql<string>`(${column} || '')` : sql<string>`+${column}`;
}

/**
 * Runs a bulk write of users with the table's secondary indexes (and, on
 * SQLite, the triggers that keep the search index in step) dropped, then
 * re-creates them from the definitions the database itself reported, so this
 * never drifts from the migrations. Building an index once is several times
 * cheaper than updating it row by row (measured: 1,000,000 users). Runs inside
 * the caller's transaction: other readers see the old table and indexes until
 * it commits; on PostgreSQL they wait for the commit, since dropping an index
 * locks the table.
 */
export async function withoutUserIndexes<T>(trx: Transaction<Database>, work: () => Promise<T>): Promise<T> {
  const dialect = dialectOf(trx);
  const saved = dialect === 'postgres' ? await postgresSecondaryIndexes(trx) : await sqliteSecondaryIndexes(trx);
  for (const object of saved) await sql`drop ${sql.raw(object.type)} ${sql.id(object.name)}`.execute(trx);
  const result = await work();
  if (dialect === 'postgres') await sql`set local maintenance_work_mem = '256MB'`.execute(trx);
  else await sql`insert into users_search(users_search) values ('rebuild')`.execute(trx);
  for (const object of saved) await sql.raw(object.definition).execute(trx);
  return result;
}

interface SchemaObject {
  type: 'index' | 'trigger';
  name: string;
  definition: string;
}

async function postgresSecondaryIndexes(trx: Transaction<Database>): Promise<SchemaObject[]> {
  const { rows } = await sql<{ name: string; definition: string }>`
    select indexname as name, indexdef as definition from pg_indexes
    where schemaname = current_schema() and tablename = 'users' and indexdef not like 'CREATE UNIQUE %'
    order by indexname`.execute(trx);
  return rows.map((row) => ({ type: 'index', ...row }));
}

async function sqliteSecondaryIndexes(trx: Transaction<Database>): Promise<SchemaObject[]> {
  // Indexes first, then triggers: re-created in this order after the load.
  const { rows } = await sql<SchemaObject>`
    select type, name, sql as definition from sqlite_master
    where tbl_name = 'users' and sql is not null
      and ((type = 'index' and sql not like 'CREATE UNIQUE %') or type = 'trigger')
    order by type, name`.execute(trx);
  return rows;
}

/**
 * Refreshes the planner's statistics of the directory tables after an import.
 * PostgreSQL plans by them, and until autovacuum gets round to a freshly loaded
 * table it would count a million users by nested loops (minutes, measured)
 * instead of a hash join (0.4 s). SQLite's planner does without.
 */
export async function refreshPlannerStatistics(trx: Transaction<Database>): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`analyze users, rooms, room_members`.execute(trx);
}
