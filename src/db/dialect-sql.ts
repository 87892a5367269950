import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';

/**
 * The SQL that differs between databases, in one place. Only SQLite is
 * implemented so far; a PostgreSQL variant will sit beside each function.
 */

/** How many search terms are tested as direct conditions before the rest go through one array parameter. */
const DIRECT_TERMS = 4;

/**
 * True when every term is a substring of `column` (binary, case-sensitive: both
 * sides are already folded). Beyond a few terms they are passed as one JSON
 * array, so a 10,000-character query with thousands of terms stays one bound
 * parameter and a shallow expression.
 */
export function containsAllTerms(column: Expression<string>, terms: readonly string[]): RawBuilder<SqlBool>[] {
  const direct = terms.slice(0, DIRECT_TERMS).map((term) => sql<SqlBool>`instr(${column}, ${term}) > 0`);
  const rest = terms.slice(DIRECT_TERMS);
  if (rest.length === 0) return direct;
  return [
    ...direct,
    sql<SqlBool>`not exists (select 1 from json_each(${JSON.stringify(rest)}) as term where instr(${column}, term.value) = 0)`,
  ];
}

/**
 * The terms a trigram index can look up: three characters (code points) or
 * more, and no U+0000, which ends an FTS5 query string (stored keys never
 * contain it, so the exact check alone rules such a term out).
 */
export function indexableTerms(terms: readonly string[]): string[] {
  return terms.filter((term) => [...term].length >= 3 && !term.includes('\0'));
}

/**
 * True when the user (by `seq`) is among the full-text matches of every term;
 * each term is quoted as an FTS5 phrase, so no character has a special meaning.
 * Call only with indexable terms; the exact substring check stays in force beside it.
 */
export function inSearchIndex(seq: Expression<number>, terms: readonly string[]): RawBuilder<SqlBool> {
  const query = terms.map((term) => `"${term.replaceAll('"', '""')}"`).join(' AND ');
  return sql<SqlBool>`${seq} in (select rowid from users_search where users_search match ${query})`;
}

/**
 * The column as an expression the planner cannot use an index for (SQLite's
 * unary plus), so that a search-index condition beside it drives the query.
 */
export function notIndexed<T>(column: Expression<T>): RawBuilder<T> {
  return sql<T>`+${column}`;
}
