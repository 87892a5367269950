import pg from 'pg';
import type { ChangeSource } from '../services/change-scoped-cache.ts';

/** The channel the change-notices migration's triggers notify on. */
export const CHANGE_CHANNEL = 'signroom_changes';

/** How often the listening connection is asked whether it still answers, and how long it may take. */
const HEARTBEAT_MS = 2000;
/** How long a connection attempt or a heartbeat may take before the connection counts as lost. */
const ANSWER_WITHIN_MS = 2000;
/** Pause before connecting again after the connection was lost. */
const RECONNECT_AFTER_MS = 1000;

/**
 * A change token for PostgreSQL: one connection listens on the channel that
 * triggers notify when a transaction changes credentials, failed logins,
 * organizations or rooms, and the token moves with every notice. While the
 * connection is not listening (not yet started, lost, reconnecting) the token
 * is undefined, so nothing is kept; it moves again once listening resumes, as
 * notices sent meanwhile were missed. Started by the first call, so a process
 * that never asks (the CLI) never opens the connection.
 *
 * A notice arrives a moment after its commit, so catchUp() asks the listening
 * connection a trivial query sent after the call: PostgreSQL delivers every
 * notice of a transaction committed before that query arrived ahead of its
 * answer. Calls made while such a query is out share the next one, so many
 * concurrent requests cost one round trip.
 */
export class PostgresChangeListener implements ChangeSource {
  readonly #connectionString: string;
  #client: pg.Client | undefined;
  #listening = false;
  #notices = 0;
  #started = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  /** The catch-up query out now, and the one that callers since it was sent wait for. */
  #asking: Promise<void> | undefined;
  #nextAsk: Promise<void> | undefined;

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

  catchUp(): Promise<void> | undefined {
    if (this.token() === undefined) return undefined;
    if (this.#asking === undefined) return this.#ask();
    // The query out now may have been sent before a commit this caller must see.
    this.#nextAsk ??= this.#asking.then(() => {
      this.#nextAsk = undefined;
      return this.#ask();
    });
    return this.#nextAsk;
  }

  /** One trivial query on the listening connection; a connection that fails or stalls counts as lost. */
  #ask(): Promise<void> {
    const client = this.#client;
    const asking = (client === undefined || !this.#listening ? Promise.resolve() : this.#answered(client)).finally(() => {
      if (this.#asking === asking) this.#asking = undefined;
    });
    this.#asking = asking;
    return asking;
  }

  /** Resolves when the connection answers a trivial query, or once it counts as lost (never rejects). */
  #answered(client: pg.Client): Promise<void> {
    return new Promise((resolve) => {
      const overdue = setTimeout(() => {
        this.#lost(client);
        resolve();
      }, ANSWER_WITHIN_MS);
      overdue.unref();
      client.query('select 1').then(
        () => {
          clearTimeout(overdue);
          resolve();
        },
        () => {
          clearTimeout(overdue);
          this.#lost(client);
          resolve();
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
    client.on('notification', () => {
      this.#notices += 1;
    });
    // Lost: stop keeping anything at once, then try again.
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
    } catch {
      this.#lost(client);
      return;
    }
    if (this.#client !== client) return;
    // Whatever was kept before may have changed while nobody listened.
    this.#notices += 1;
    this.#listening = true;
    this.#scheduleHeartbeat(client);
  }

  /** A connection that stops answering (a network cut sends no error) counts as lost, even while no request asks. */
  #scheduleHeartbeat(client: pg.Client): void {
    this.#timer = setTimeout(() => {
      void this.#answered(client).then(() => {
        if (this.#client === client) this.#scheduleHeartbeat(client);
      });
    }, HEARTBEAT_MS);
    this.#timer.unref();
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
    if (client === undefined) return;
    client.removeAllListeners('notification');
    // Ending a broken connection may fail or never finish; the socket is closed either way.
    client.on('error', () => undefined);
    await Promise.race([client.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, ANSWER_WITHIN_MS).unref())]);
  }
}
