import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';

/**
 * Named prepared statements on PostgreSQL, for the statements run inside `preparedStatements()`.
 *
 * Kysely sends every statement unnamed, so PostgreSQL parses it and plans it again on each run:
 * for the directory writer's short statements by key, parsing and planning took as long as
 * running them (statement log of a million-user organization: parse 0.1–0.2 ms, bind with its
 * plan 0.15–0.3 ms, execute 0.05–0.5 ms), and a batch of writes is a serial chain of them.
 * Named, each connection parses a statement once and, after five runs, PostgreSQL may keep a
 * generic plan (`plan_cache_mode = auto`): 269–273 → 292–343 writes/s from 8 clients in turns
 * (docs/benchmarks.md, "Writes on PostgreSQL, and lookups beside them").
 *
 * Only where the caller says so: a generic plan is right for a lookup by key, and can be wrong
 * for the lookups' searches, whose best plan depends on the pattern searched. The texts named
 * are bounded (MAX_NAMED: statements with lists of variable length make one text per length,
 * the writer's last statement one per number of events and tallies; the first named keep their
 * names), so the memory a connection's server process keeps for them is too.
 *
 * A statement whose result's columns change under it (another process's migration while this
 * one runs) fails once with "cached plan must not change result type": its text is not named
 * again, so the statement runs unnamed from then on; likewise a name the server does not know or
 * knows already (a connection shared in a way it should not be).
 *
 * Only on a connection that is a session of its own (database.ts: with change notices on, which a
 * pooler in transaction mode rules out, docs/operations.md): there a statement named on one
 * server connection could be run on another, or another process's statement of the same name.
 */
const MAX_NAMED = 200;
/** Longer texts are not named (a list of thousands of values is not run again the same). */
const MAX_NAMED_TEXT = 4096;

const names = new Map<string, string>();
let made = 0;
/** Texts that must not be named again (see above). */
const unnamed = new Set<string>();
const scope = new AsyncLocalStorage<true>();

/** Runs `work` with its PostgreSQL statements named (see above); nothing changes on SQLite. */
export function preparedStatements<T>(work: () => Promise<T>): Promise<T> {
  return scope.run(true, work);
}

/** Makes a pool's new client name the statements run inside preparedStatements(). */
export function nameStatementsOf(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const named = (text: unknown, values?: unknown, ...rest: unknown[]): unknown => {
    if (typeof text !== 'string' || scope.getStore() !== true || rest.length > 0 || !Array.isArray(values) || values.length === 0)
      return query(text, values, ...rest);
    const name = nameOf(text);
    if (name === undefined) return query(text, values);
    const result = query({ name, text, values }) as Promise<unknown>;
    return result.catch((error: unknown) => {
      if (isNamingError(error)) {
        names.delete(text);
        unnamed.add(text);
      }
      throw error;
    });
  };
  (client as unknown as { query: typeof named }).query = named;
}

/**
 * Errors after which a text is not named again, by SQLSTATE (messages are in the server's
 * language): a cached plan whose result changed (0A000 from RevalidateCachedQuery), a prepared
 * statement the connection does not have (26000) or has already (42P05).
 */
function isNamingError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { code, routine } = error as { code?: unknown; routine?: unknown };
  return (code === '0A000' && routine === 'RevalidateCachedQuery') || code === '26000' || code === '42P05';
}

function nameOf(text: string): string | undefined {
  const name = names.get(text);
  if (name !== undefined || text.length > MAX_NAMED_TEXT || names.size >= MAX_NAMED || unnamed.has(text)) return name;
  const named = `signroom_${made++}`;
  names.set(text, named);
  return named;
}
