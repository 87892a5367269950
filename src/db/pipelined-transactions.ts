import { AsyncLocalStorage } from 'node:async_hooks';
import type { Writable } from 'node:stream';
import pg from 'pg';

/**
 * The directory writer's transactions on PostgreSQL in two round trips fewer: the BEGIN travels
 * with the first statement, the COMMIT with the last.
 *
 * A batch of the writer is a chain of short statements, each waiting for the one before (BEGIN,
 * the version's bump, the changes' reads and writes, the events, COMMIT: six for a single change,
 * about thirteen for a batch of four). Where PostgreSQL is on another machine each is a round
 * trip of the network, and the organization's other writers wait for the batch's every one.
 * On a client in node-postgres's pipeline mode (the pool's `pipeline` option: a query is sent as
 * soon as it is asked for, each with its own Sync, answered in order), inside
 * `pipelinedTransaction()`:
 * - `begin` is answered at once and sent with the next statement, which answers once both have
 *   (if BEGIN failed, with its error; the statement then failed too, on the dead connection that
 *   is the only way BEGIN fails);
 * - the statement run inside `lastStatement()` is followed on the wire by `commit`, and answers
 *   once both have: with its result, the transaction committed; with its own error when the
 *   server refused it (PostgreSQL then completes the COMMIT as a rollback); else, with the error
 *   of whatever failed, marked so that `isOutcomeUnknown()` says the outcome is unknown (the
 *   connection broke while the COMMIT was on its way, or node-postgres failed the statement
 *   without sending it while the COMMIT went and committed): a caller must not run the
 *   transaction's changes again. Kysely's own COMMIT after it is answered as the transaction
 *   ended (a ROLLBACK answer, which Kysely turns into an error, if it was rolled back), its
 *   ROLLBACK at once; any other statement after it is refused (it would run outside the
 *   transaction).
 * - the statement run inside `withReadsAhead(reads, …)` is followed on the wire by `reads`
 *   (read-only statements, compiled): when the transaction's next statements are those, the same
 *   texts and values in the same order, each is answered by what was sent then, without a round
 *   trip of its own; any other statement first drops them (its answer is theirs to ignore).
 * Elsewhere (other transactions, SQLite) statements run as they always do.
 *
 * Measured with bench/write-round-trips.ts (a link of about 2.8 ms a round trip): a single write
 * of the mix waited 9.7–11.1 round trips before, 6.6–7.9 after; eight clients 82 → 98 writes/s.
 * On one machine the round trip is short next to the statements' own work, and bench:writes
 * showed no difference beyond its noise (docs/benchmarks.md).
 */
const transactionScope = new AsyncLocalStorage<true>();
const lastScope = new AsyncLocalStorage<true>();

/** Runs `work` (a Kysely transaction) with its BEGIN sent with its first statement (see above). */
export function pipelinedTransaction<T>(work: () => Promise<T>): Promise<T> {
  return transactionScope.run(true, work);
}

/** Statements sent right behind another's (see above). */
export interface ReadAhead {
  readonly sql: string;
  readonly parameters: readonly unknown[];
}
const aheadScope = new AsyncLocalStorage<{ reads: readonly ReadAhead[]; sent: boolean }>();

/**
 * Runs `work`, one statement of a pipelined transaction (not its last), with `reads` sent right
 * behind it (see above): run next with `executeQuery`, they wait for no round trip of their own.
 */
export function withReadsAhead<T>(reads: readonly ReadAhead[], work: () => Promise<T>): Promise<T> {
  return aheadScope.run({ reads, sent: false }, work);
}

/** Runs a transaction's last statement, one only, with the transaction's COMMIT right behind it (see above). */
export function lastStatement<T>(work: () => Promise<T>): Promise<T> {
  return lastScope.run(true, work);
}

/** Errors after which the outcome of a transaction whose COMMIT was sent is not known (see above). */
const unknownOutcomes = new WeakSet<object>();

/** Whether `error` leaves the outcome of its transaction unknown (see above): its changes must not be run again. */
export function isOutcomeUnknown(error: unknown): boolean {
  return typeof error === 'object' && error !== null && unknownOutcomes.has(error);
}

function unknownOutcome(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) unknownOutcomes.add(error);
  return error;
}

/** What node-postgres answers for a transaction's BEGIN, COMMIT and ROLLBACK. */
const BEGUN = { command: 'BEGIN', rowCount: null, rows: [], fields: [] };
const COMMITTED = { command: 'COMMIT', rowCount: null, rows: [], fields: [] };
const ROLLED_BACK = { command: 'ROLLBACK', rowCount: null, rows: [], fields: [] };

type Query = (...args: unknown[]) => Promise<{ command?: string }>;

/** How a transaction whose COMMIT was sent with its last statement ended, as far as this client knows. */
type Ended = 'committed' | 'rolled back' | 'unknown';

/** Makes a pool's new client (in pipeline mode) send the transactions run in `pipelinedTransaction()` as said above. */
export function pipelineTransactionsOf(client: pg.PoolClient): void {
  const query = client.query.bind(client) as unknown as Query;
  const stream = (client as unknown as { connection?: { stream?: Partial<Pick<Writable, 'cork' | 'uncork'>> } }).connection?.stream;
  /**
   * Runs `send`, which sends several statements, with the socket corked: they go out in one
   * write (node-postgres corks each statement's messages, not several statements), one system
   * call and one wake-up of the server process instead of one each.
   */
  const together = <T>(send: () => T): T => {
    stream?.cork?.();
    try {
      return send();
    } finally {
      stream?.uncork?.();
    }
  };
  /** Whether a BEGIN waits to be sent with the next statement. */
  let beginning = false;
  /** Set once the open transaction's COMMIT was sent with its last statement. */
  let ended: Ended | undefined;
  /** Reads sent ahead that the next statements may take the answers of, in order. */
  let sentAhead: { text: string; values: readonly unknown[]; answer: Promise<unknown> }[] = [];
  const pipelined = (text: unknown, values?: unknown, ...rest: unknown[]): unknown => {
    if (transactionScope.getStore() !== true || rest.length > 0 || typeof values === 'function') {
      sentAhead = [];
      return query(text, values, ...rest);
    }
    const ahead = sentAhead.shift();
    if (ahead !== undefined && ahead.text === text && sameValues(ahead.values, values)) return ahead.answer;
    sentAhead = [];
    if (text === 'begin') {
      beginning = true;
      ended = undefined;
      return Promise.resolve(BEGUN);
    }
    if (ended !== undefined) {
      // The transaction has ended with its last statement: Kysely's COMMIT is answered as that
      // ended (a ROLLBACK answer makes Kysely throw), its ROLLBACK at once; any other statement
      // would run outside the transaction.
      const outcome = ended;
      if (text === 'rollback') {
        ended = undefined;
        return Promise.resolve(ROLLED_BACK);
      }
      if (text === 'commit') {
        ended = undefined;
        if (outcome === 'unknown') return Promise.reject(unknownOutcome(new Error("the transaction's COMMIT went unanswered")));
        return Promise.resolve(outcome === 'committed' ? COMMITTED : ROLLED_BACK);
      }
      return Promise.reject(new Error('the transaction has ended with its last statement: no statement may follow it'));
    }
    const last = lastScope.getStore() === true;
    const withBegin = beginning;
    beginning = false;
    const reads = last ? undefined : aheadScope.getStore();
    const sendAhead = reads !== undefined && !reads.sent;
    if (sendAhead) reads.sent = true;
    // In this order on the wire: BEGIN, the statement, then its COMMIT or the reads sent ahead of their turn.
    const [begun, own, commit] = together(() => {
      const sent = [withBegin ? quiet(query('begin', [])) : undefined, quiet(query(text, values)), last ? quiet(query('commit', [])) : undefined] as const;
      if (sendAhead) sentAhead = reads.reads.map((read) => ({ text: read.sql, values: read.parameters, answer: quiet(query(read.sql, [...read.parameters])) }));
      return sent;
    });
    if (commit === undefined) return begun === undefined ? own : begun.then(() => own);
    ended = 'unknown';
    return (async () => {
      const [began, ran, done] = await Promise.allSettled([begun, own, commit]);
      if (began.status === 'rejected' || ran.status === 'rejected') {
        const failure = began.status === 'rejected' ? began : (ran as PromiseRejectedResult);
        // Rolled back only if the server itself refused the statement and completed the COMMIT as
        // a rollback; any other failure (the connection's, a statement node-postgres did not
        // send, the COMMIT answered as committed) leaves the outcome unknown.
        const refused = failure.reason instanceof pg.DatabaseError && done.status === 'fulfilled' && done.value.command === 'ROLLBACK';
        ended = refused ? 'rolled back' : 'unknown';
        throw refused ? failure.reason : unknownOutcome(failure.reason);
      }
      if (done.status === 'rejected') throw unknownOutcome(done.reason);
      if (done.value.command !== 'COMMIT') {
        ended = 'rolled back';
        throw new Error(`the transaction's COMMIT completed as ${done.value.command ?? 'nothing'}`);
      }
      ended = 'committed';
      return ran.value;
    })();
  };
  (client as unknown as { query: typeof pipelined }).query = pipelined;
}

function sameValues(sent: readonly unknown[], values: unknown): boolean {
  return Array.isArray(values) && values.length === sent.length && values.every((value, k) => value === sent[k]);
}

/** `promise`, its rejection handled where it is awaited (or not at all: a BEGIN's after the statement's). */
function quiet<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}
