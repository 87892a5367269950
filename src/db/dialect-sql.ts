import { sql, type Expression, type Kysely, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
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

/** True when `column` is one of `ids`: one bound parameter and one statement text whatever their number. */
export function isAmong(dialect: DialectName, column: Expression<string>, ids: readonly string[]): RawBuilder<SqlBool> {
  return dialect === 'postgres'
    ? sql<SqlBool>`${column} = any(${[...ids]}::text[])`
    : sql<SqlBool>`${column} in (select value from json_each(${JSON.stringify(ids)}))`;
}

/**
 * Runs `work` inside the current transaction with PostgreSQL's parallel query
 * made cheap to the planner, then restores the server's settings. For the
 * passes that test a search term on many users: the one-pass collection stops
 * at a limit, so the planner expects to stop early and plans no workers, yet a
 * short term scans every user of the organization, a scan workers share.
 * SQLite has no such plan.
 */
export async function withParallelScans<T>(trx: Transaction<Database>, work: () => Promise<T>): Promise<T> {
  if (dialectOf(trx) !== 'postgres') return work();
  await sql`select set_config('parallel_setup_cost', '0', true), set_config('parallel_tuple_cost', '0', true)`.execute(trx);
  // Back to the session's values: the page that follows is an index walk, which workers would only slow.
  const restore = () =>
    sql`select set_config(name, reset_val, true) from pg_settings where name in ('parallel_setup_cost', 'parallel_tuple_cost')`.execute(trx);
  let result: T;
  try {
    result = await work();
  } catch (error) {
    // A failed statement aborts the transaction, which then refuses the restore (and ends anyway): the first error counts.
    await restore().catch(() => undefined);
    throw error;
  }
  await restore();
  return result;
}

/**
 * For the rest of the current transaction, has PostgreSQL walk indexes rather
 * than scan and sort, without parallel workers: for the search index's load,
 * which reads a whole organization in pieces of 10,000 users along an index
 * (the users' seq, or a sort index). Misjudging the organization filter, the
 * planner scanned the whole table and sorted it for some pieces and gave
 * others parallel workers, whose start cost more than they saved.
 */
export async function preferIndexWalks(trx: Transaction<Database>): Promise<void> {
  if (dialectOf(trx) !== 'postgres') return;
  await sql`select set_config('max_parallel_workers_per_gather', '0', true), set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)`.execute(
    trx,
  );
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
 * SQLite the index keeps no positions (`detail=none`), so each term is looked
 * up as all of its trigrams, each quoted as an FTS5 string over `users_search`;
 * on PostgreSQL it is a `LIKE '%term%'` that the pg_trgm GIN index answers, with
 * `%`, `_` and `\` escaped. No character has a special meaning either way. Call
 * only with indexable terms; the exact substring check stays in force beside it
 * (and makes the SQLite candidates exact).
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
  const query = spread([...new Set(terms.flatMap(trigrams))], MAX_TRIGRAMS)
    .map((trigram) => `"${trigram.replaceAll('"', '""')}"`)
    .join(' AND ');
  return sql<SqlBool>`${user.seq} in (select rowid from users_search where users_search match ${query})`;
}

/**
 * Trigrams looked up per query, at most: a few already narrow the candidates to
 * about the matches, the substring test does the rest, and FTS5 limits how
 * deep a query expression may nest (a 10,000-character term has 9,998).
 */
const MAX_TRIGRAMS = 24;

/** At most `count` items, spread evenly over the list (first and last included). */
function spread<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  return Array.from({ length: count }, (_, index) => items[Math.round((index * (items.length - 1)) / (count - 1))]!);
}

/** Every three-character window of a term, in code points, as FTS5's trigram tokenizer cuts text. */
function trigrams(term: string): string[] {
  const characters = [...term];
  return characters.slice(2).map((_, index) => characters.slice(index, index + 3).join(''));
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
 * Runs a bulk write of users with the table's secondary indexes dropped (and,
 * on SQLite, the triggers that keep the search index in step; on PostgreSQL,
 * the foreign key to organizations, checked row by row otherwise), then
 * re-creates them from the definitions the database itself reported, so this
 * never drifts from the migrations. Building an index or checking a key once
 * is much cheaper than row by row.
 * `withKeys` (PostgreSQL, for an organization without stored users, whose
 * load is a plain insert) drops the unique keys and the foreign keys that
 * point at them too; re-creating them checks them all at once. Runs inside the
 * caller's transaction: other readers see the old table until it commits; on
 * PostgreSQL they wait for the commit, since dropping an index locks the table.
 */
export async function withoutUserIndexes<T>(trx: Transaction<Database>, options: { withKeys: boolean }, work: () => Promise<T>): Promise<T> {
  const dialect = dialectOf(trx);
  const saved = dialect === 'postgres' ? await postgresBulkObstacles(trx, options.withKeys) : await sqliteBulkObstacles(trx, options.withKeys);
  for (const object of [...saved].reverse()) await object.drop.execute(trx);
  const result = await work();
  if (dialect === 'postgres') await sql`set local maintenance_work_mem = '256MB'`.execute(trx);
  else await sql`insert into users_search(users_search) values ('rebuild')`.execute(trx);
  for (const object of saved) await object.create.execute(trx);
  return result;
}

/** A schema object that slows a bulk load down: how to drop it, and how to create it again. */
interface SchemaObject {
  drop: RawBuilder<unknown>;
  create: RawBuilder<unknown>;
}

/** In the order they are created again (and dropped in reverse): indexes, unique keys, foreign keys. */
async function postgresBulkObstacles(trx: Transaction<Database>, withKeys: boolean): Promise<SchemaObject[]> {
  const { rows: indexes } = await sql<{ name: string; definition: string }>`
    select indexname as name, indexdef as definition from pg_indexes
    where schemaname = current_schema() and tablename = 'users'
      and (indexdef not like 'CREATE UNIQUE %'
        or (${withKeys} and indexname not in (select conname from pg_constraint where conrelid = 'users'::regclass)))
    order by indexdef like 'CREATE UNIQUE %' desc, indexname`.execute(trx);
  const { rows: constraints } = await sql<{ table: string; name: string; definition: string }>`
    select conrelid::regclass::text as table, conname as name, pg_get_constraintdef(oid) as definition from pg_constraint
    where (conrelid = 'users'::regclass and contype = 'f')
      or (${withKeys} and conrelid = 'users'::regclass and contype = 'u')
      or (${withKeys} and confrelid = 'users'::regclass and conrelid <> 'users'::regclass)
    order by contype = 'f', conrelid <> 'users'::regclass, conname`.execute(trx);
  return [
    ...indexes.map((index) => ({ drop: sql`drop index ${sql.id(index.name)}`, create: sql.raw(index.definition) })),
    ...constraints.map((constraint) => ({
      drop: sql`alter table ${sql.table(constraint.table)} drop constraint ${sql.id(constraint.name)}`,
      create: sql`alter table ${sql.table(constraint.table)} add constraint ${sql.id(constraint.name)} ${sql.raw(constraint.definition)}`,
    })),
  ];
}

async function sqliteBulkObstacles(trx: Transaction<Database>, withKeys: boolean): Promise<SchemaObject[]> {
  // Indexes first, then triggers: re-created in this order after the load. With `withKeys`, the
  // unique index on emails too (the one on ids belongs to the table and stays).
  const { rows } = await sql<{ type: 'index' | 'trigger'; name: string; definition: string }>`
    select type, name, sql as definition from sqlite_master
    where tbl_name = 'users' and sql is not null
      and ((type = 'index' and (${withKeys ? 1 : 0} or sql not like 'CREATE UNIQUE %')) or type = 'trigger')
    order by type, name`.execute(trx);
  return rows.map((row) => ({ drop: sql`drop ${sql.raw(row.type)} ${sql.id(row.name)}`, create: sql.raw(row.definition) }));
}

/**
 * Makes imports wait for each other, from the start of their transaction. On
 * PostgreSQL two imports could otherwise each hold a read lock on users while
 * one drops an index for a bulk load (a deadlock), or both insert the first
 * users of one new organization. SQLite's single writer already serialises them.
 */
export async function serializeImports(trx: Transaction<Database>): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`select pg_advisory_xact_lock(hashtextextended('signroom:import', 0))`.execute(trx);
}

/**
 * Refreshes the planner's statistics of the directory tables after an import.
 * PostgreSQL plans by them, and until autovacuum gets round to a freshly loaded
 * table it would count a large organization by nested loops instead of a hash
 * join. SQLite's planner does without.
 */
export async function refreshPlannerStatistics(trx: Transaction<Database>): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`analyze users, rooms, room_members`.execute(trx);
}

/**
 * After an import has committed: PostgreSQL's VACUUM marks the freshly written
 * pages all-visible, so walking a sort index to a deep page reads the index
 * alone, not a heap page per skipped user. It cannot run in a transaction,
 * and only visits pages not yet marked, so it is cheap after a small import.
 * Failing, it changes nothing the import did: autovacuum gets there later.
 */
export async function markImportVisible(db: Kysely<Database>): Promise<void> {
  if (dialectOf(db) !== 'postgres') return;
  try {
    await sql`vacuum users, room_members`.execute(db);
  } catch {
    // The import is committed; only the speed of deep pages waits for autovacuum.
  }
}
