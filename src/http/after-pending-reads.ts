/**
 * Resolves once the event loop has read every request waiting in this round of
 * I/O: in the check phase that follows the poll phase (setImmediate), one
 * promise for all the requests read in that phase.
 *
 * Why wait: each request may use what the server keeps between requests only
 * if it was read from the database (or checked unchanged) after the request
 * arrived (its `receivedAt`, taken before waiting). Checked here on SQLite,
 * that is a system call per check (src/db/sqlite-commits.ts); under load the
 * requests read in one round, a few to a dozen, are then served one after the
 * other, so the first one's check, made after all of them arrived, serves them
 * all. Correct however the requests are grouped: a request whose arrival is
 * later than the last check (one parsed after this phase: pipelined, say) gets
 * a check of its own.
 */
let pending: Promise<void> | undefined;

export function afterPendingReads(): Promise<void> {
  pending ??= new Promise((resolve) =>
    setImmediate(() => {
      pending = undefined;
      resolve();
    }),
  );
  return pending;
}
