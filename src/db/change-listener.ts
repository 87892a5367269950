import pg from 'pg';
import type { ChangeSource, ChangeTable } from '../lib/change-scoped-cache.ts';

/** The channel the change-notices migration's triggers notify on. */
export const CHANGE_CHANNEL = 'signroom_changes';

/** How often the listening connection is asked whether it still answers, and how long it may take. */
const HEARTBEAT_MS = 2000;
/** How long a connection attempt or a heartbeat may take before the connection counts as lost. */
const ANSWER_WITHIN_MS = 2000;
/** Pause before connecting again after the connection was lost. */
const RECONNECT_AFTER_MS = 1000;
/** The heartbeat query: which server process answers, and whether it listens. */
const LISTENING_QUERY = `select pg_backend_pid() as pid, '${CHANGE_CHANNEL}' = any(array(select pg_listening_channels())) as listening`;

/**
 * A change token for PostgreSQL: one connection listens on the channel that
 * triggers notify when a transaction changes credentials, failed logins,
 * organizations or rooms, and the token moves with every notice. While the
 * connection is not listening (not yet started, lost, reconnecting) the token
 * is undefined, so nothing is kept; it moves again once listening resumes, as
 * notices sent meanwhile were missed. Started by the first call, so a process
 * that never asks (the CLI) never opens the connection.
 *
 * A notice arrives a moment after its commit, so catchUp(asOf) makes sure a
 * Sync message (the protocol's barrier: no statement, no transaction) sent on
 * the listening connection after that moment has been answered: PostgreSQL
 * delivers every notice of a transaction committed before the message arrived
 * ahead of its ReadyForQuery. Callers share them: the latest one sent serves
 * every moment before it was sent, so the requests of one turn of the event
 * loop cost one round trip, and one sent behind another does not wait for it.
 * A trivial query would do the same at several times the cost on both ends (a
 * statement parsed, planned and run in a transaction; a query object here).
 */
export class PostgresChangeListener implements ChangeSource {
  readonly #connectionString: string;
  #client: pg.Client | undefined;
  #listening = false;
  #notices = 0;
  /** Notices by the table they name, and those that name none (any table: sent before the tables were named) with every (re)start of listening. */
  readonly #byTable = new Map<string, number>();
  #anyTable = 0;
  #started = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  /** The server process that listens (`pg_backend_pid()`): a heartbeat answered by another proves nothing. */
  #listenerPid: number | undefined;
  /** The Sync messages out, in the order sent, each with when: each ReadyForQuery answers the first. */
  readonly #syncs: { sentAt: number; answered: Promise<void>; resolve: () => void }[] = [];
  /** Counts a connection lost when the first Sync out is not answered in time. */
  #stallTimer: NodeJS.Timeout | undefined;
  /** The heartbeat's query, out or waiting for the Syncs before it (no Sync is sent meanwhile). */
  #heartbeat: Promise<void> | undefined;
  /** When the latest answered Sync, heartbeat query or LISTEN was sent: every notice committed before then has arrived. */
  #caughtUpTo = -Infinity;

  constructor(connectionString: string) {
    this.#connectionString = connectionString;
  }

  /** Moves with every notice and every (re)start of listening; undefined while not listening. */
  token(): number | undefined {
    if (!this.#started) {
      this.#started = true;
      void this.#connect();
    }
    return this.#listening ? this.#notices : undefined;
  }

  /** Moves with the notices of these tables (and those naming none, and every (re)start): each count only grows, so their sum moves whenever one does. */
  about(tables: readonly ChangeTable[]): ChangeSource {
    return {
      token: () => {
        if (this.token() === undefined) return undefined;
        let sum = this.#anyTable;
        for (const table of tables) sum += this.#byTable.get(table) ?? 0;
        return sum;
      },
      catchUp: (asOf) => this.catchUp(asOf),
      about: (others) => this.about(others),
    };
  }

  catchUp(asOf: number): Promise<void> | undefined {
    if (this.token() === undefined || this.#caughtUpTo >= asOf) return undefined;
    // The heartbeat's query is sent once the Syncs before it are answered; it answers for them all.
    if (this.#heartbeat !== undefined) return this.#heartbeat.then(() => this.catchUp(asOf));
    const latest = this.#syncs.at(-1);
    if (latest !== undefined && latest.sentAt >= asOf) return latest.answered;
    return this.#sync();
  }

  /** A Sync message on the listening connection, answered in turn by #answeredInTurn. */
  #sync(): Promise<void> {
    const client = this.#client;
    if (client === undefined || !this.#listening) return Promise.resolve();
    let resolve!: () => void;
    const answered = new Promise<void>((done) => (resolve = done));
    this.#syncs.push({ sentAt: performance.now(), answered, resolve });
    // A connection that can no longer be written to would never answer it.
    if (!client.connection.stream.writable) {
      this.#lost(client);
      return answered;
    }
    client.connection.sync();
    this.#stallTimer ??= setTimeout(() => this.#checkStall(client), ANSWER_WITHIN_MS).unref();
    return answered;
  }

  /** A ReadyForQuery on the listening connection: the answer to the first Sync out (none: a query's own). */
  #answeredInTurn(client: pg.Client): void {
    if (this.#client !== client) return;
    const answered = this.#syncs.shift();
    if (answered === undefined) return;
    this.#caughtUpTo = Math.max(this.#caughtUpTo, answered.sentAt);
    answered.resolve();
  }

  /** A connection whose first Sync out is unanswered after ANSWER_WITHIN_MS counts as lost (a network cut sends no error). */
  #checkStall(client: pg.Client): void {
    this.#stallTimer = undefined;
    const first = this.#syncs[0];
    if (first === undefined || this.#client !== client) return;
    const late = performance.now() - first.sentAt;
    if (late >= ANSWER_WITHIN_MS) this.#lost(client);
    else this.#stallTimer = setTimeout(() => this.#checkStall(client), ANSWER_WITHIN_MS - late).unref();
  }

  /** Answers every Sync out (the connection is gone: their callers find no token and keep nothing). */
  #releaseSyncs(): void {
    clearTimeout(this.#stallTimer);
    this.#stallTimer = undefined;
    for (const sync of this.#syncs.splice(0)) sync.resolve();
  }

  /**
   * Whether the connection answered, from the server process that listens; false once it counts
   * as lost (never rejects). Another process answering means a pooler in transaction mode stands
   * between: notices could then go to whoever holds that process, so nothing is kept any more.
   */
  #answered(client: pg.Client): Promise<boolean> {
    return new Promise((resolve) => {
      const overdue = setTimeout(() => {
        this.#lost(client);
        resolve(false);
      }, ANSWER_WITHIN_MS);
      overdue.unref();
      client.query<{ pid: number; listening: boolean }>(LISTENING_QUERY).then(
        ({ rows }) => {
          clearTimeout(overdue);
          if (rows[0]?.pid === this.#listenerPid && rows[0]?.listening === true) return resolve(true);
          this.#giveUp(client);
          resolve(false);
        },
        () => {
          clearTimeout(overdue);
          this.#lost(client);
          resolve(false);
        },
      );
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#drop();
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#connectionString,
      connectionTimeoutMillis: ANSWER_WITHIN_MS,
      application_name: 'signroom-changes',
      keepAlive: true,
    });
    this.#client = client;
    client.on('notification', ({ payload }) => {
      this.#notices += 1;
      if (payload === undefined || payload === '') this.#anyTable += 1;
      else this.#byTable.set(payload, (this.#byTable.get(payload) ?? 0) + 1);
    });
    // Lost: stop keeping anything at once, then try again.
    client.on('error', () => this.#lost(client));
    client.connection.on('readyForQuery', () => this.#answeredInTurn(client));
    client.on('end', () => this.#lost(client));
    let listenSentAt: number;
    try {
      await client.connect();
      listenSentAt = performance.now();
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
      const [answer] = (await client.query<{ pid: number; listening: boolean }>(LISTENING_QUERY)).rows;
      // Catch-ups are Sync messages, which cannot tell who answers: the first check is made here.
      if (answer?.listening !== true) {
        this.#giveUp(client);
        return;
      }
      this.#listenerPid = answer.pid;
    } catch {
      this.#lost(client);
      return;
    }
    if (this.#client !== client) return;
    // Whatever was kept before may have changed while nobody listened.
    this.#notices += 1;
    this.#anyTable += 1;
    this.#caughtUpTo = listenSentAt;
    this.#listening = true;
    this.#scheduleHeartbeat(client);
  }

  /**
   * A connection that stops answering (a network cut sends no error) counts as lost, even while
   * no request asks, and one answered by another server process is given up (#answered). The
   * query goes out once the Syncs before it are answered (node-postgres must not take their
   * ReadyForQuery for its own); catch-ups meanwhile wait for it, and it answers for them.
   */
  #scheduleHeartbeat(client: pg.Client): void {
    this.#timer = setTimeout(() => {
      const beat = this.#beat(client);
      this.#heartbeat = beat;
      // Registered first, so it runs before the catch-ups waiting on the beat look again.
      void beat.then(() => {
        if (this.#heartbeat === beat) this.#heartbeat = undefined;
        if (this.#client === client) this.#scheduleHeartbeat(client);
      });
    }, HEARTBEAT_MS);
    this.#timer.unref();
  }

  /** The heartbeat's query, once the Syncs out are answered; never rejects. */
  async #beat(client: pg.Client): Promise<void> {
    await this.#syncs.at(-1)?.answered;
    const sentAt = performance.now();
    if (this.#client === client && (await this.#answered(client)) && this.#client === client) this.#caughtUpTo = Math.max(this.#caughtUpTo, sentAt);
  }

  /** Stops listening for good: a warning once, and nothing kept between requests from now on. */
  #giveUp(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#closed = true;
    void this.#drop();
    process.emitWarning(
      'PostgreSQL answered on a server process other than the one listening for changes (a pooler in transaction mode?): ' +
        'nothing is kept between requests any more. Set SIGNROOM_DB_CHANGE_NOTICES=off for such a connection.',
      { code: 'SIGNROOM_CHANGE_NOTICES' },
    );
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#listening = false;
    void this.#drop();
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#connect(), RECONNECT_AFTER_MS);
    this.#timer.unref();
  }

  async #drop(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    this.#listening = false;
    this.#caughtUpTo = -Infinity;
    this.#heartbeat = undefined;
    this.#releaseSyncs();
    if (client === undefined) return;
    client.removeAllListeners('notification');
    // Ending a broken connection may fail or never finish; the socket is closed either way.
    client.on('error', () => undefined);
    await Promise.race([client.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, ANSWER_WITHIN_MS).unref())]);
  }
}
