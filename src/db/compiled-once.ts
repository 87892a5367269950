import { CompiledQuery, type Kysely } from 'kysely';
import { dialectOf, type DialectName } from './dialect.ts';
import type { Database } from './tables.ts';

/** How an argument's marker starts (with U+0000, which no statement's own text or fixed values hold). */
const MARKER = '\u0000compiled-once:';

/** Where a compiled statement's parameter comes from: an argument by name, or a value the builder fixed. */
type Slot<Name extends string> = { arg: Name } | { value: unknown };

/**
 * A statement the query builder builds once per dialect, then run as its text with the arguments
 * bound in place. For statements run after every commit by every server (a lookup's scope, the
 * changes an index takes in): building one took longer than SQLite took to run it (a lookup
 * server beside 200 writes/s spent 2.9% of its thread building the scope alone; docs/benchmarks.md).
 *
 * `build` returns a query builder or a `sql` template; it is called with a distinct marker string
 * for each argument, and every parameter of the compiled statement that is a marker is bound to
 * that argument at each run; any other parameter is a value the builder fixed, bound as it was. So `build` must pass each argument as a value
 * as it is (never into the text, as `sql.lit` or `sql.raw` would, nor made into another value, as
 * `%${arg}%`) and must not branch on it: a statement that does is refused at its first run. The
 * query builder's plugins see the statement once, when it is built.
 */
export function compiledOnce<Name extends string, Row>(
  names: readonly Name[],
  build: (db: Kysely<Database>, args: Record<Name, string>) => { compile(db: Kysely<Database>): CompiledQuery<Row> },
): (db: Kysely<Database>, args: Record<Name, unknown>) => Promise<Row[]> {
  const compiled = new Map<DialectName, { text: string; slots: Slot<Name>[] }>();
  const compile = (db: Kysely<Database>) => {
    const markers = Object.fromEntries(names.map((name) => [name, `${MARKER}${name}\u0000`])) as Record<Name, string>;
    const byMarker = new Map<unknown, Name>(names.map((name) => [markers[name], name]));
    const { sql: text, parameters } = build(db, markers).compile(db);
    const slots = parameters.map((value): Slot<Name> => {
      const arg = byMarker.get(value);
      return arg !== undefined ? { arg } : { value };
    });
    const unbound = names.filter((name) => !slots.some((slot) => 'arg' in slot && slot.arg === name));
    if (unbound.length > 0) throw new Error(`compiledOnce: ${unbound.join(', ')} not bound as a parameter`);
    const frozen = text.includes(MARKER) || slots.some((slot) => 'value' in slot && typeof slot.value === 'string' && slot.value.includes(MARKER));
    if (frozen) throw new Error('compiledOnce: an argument went into the text or into a value of its own');
    return { text, slots };
  };
  return async (db, args) => {
    const dialect = dialectOf(db);
    let statement = compiled.get(dialect);
    if (statement === undefined) {
      statement = compile(db);
      compiled.set(dialect, statement);
    }
    const parameters = statement.slots.map((slot) => ('arg' in slot ? args[slot.arg] : slot.value));
    const { rows } = await db.executeQuery<Row>(CompiledQuery.raw(statement.text, parameters));
    return rows;
  };
}
