import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { isOutcomeUnknown, lastStatement, pipelinedTransaction, pipelineTransactionsOf, withReadsAhead } from '../../src/db/pipelined-transactions.ts';
import { freshDatabase, type TestDatabase } from '../helpers/databases.ts';

interface Tables {
  probe: { id: number; ref: number | null };
}

/*
 * Transactions run in pipelinedTransaction() send their BEGIN with the first statement and their
 * COMMIT with the one run in lastStatement(); what a caller sees must be what it sees without:
 * the changes committed, or on any failure none of them, with the failing statement's error.
 */
describe('pipelined transactions on PostgreSQL', () => {
  let database: TestDatabase;
  let db: Kysely<Tables>;
  /** What another connection sees committed. */
  let observer: pg.Client;
  /** A database of one connection in pipeline mode, as the server's pool makes it; `prepare` sees each client first, beneath the pipelining. */
  const pipelinedDb = (prepare: (client: pg.PoolClient) => void = () => undefined) => {
    const pool = new pg.Pool({ connectionString: database.env['DATABASE_URL'], max: 1, pipeline: true });
    pool.on('connect', (client) => {
      prepare(client);
      pipelineTransactionsOf(client);
    });
    return new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
  };
  before(async () => {
    database = await freshDatabase('postgres');
    db = pipelinedDb();
    // A deferred reference is checked at COMMIT: what makes a commit fail on its own.
    await sql`create table probe (id integer primary key, ref integer references probe (id) deferrable initially deferred)`.execute(db);
    observer = new pg.Client({ connectionString: database.env['DATABASE_URL'] });
    await observer.connect();
  });
  after(async () => {
    await observer.end();
    await db.destroy();
    await database.drop();
  });
  beforeEach(async () => {
    await sql`delete from probe`.execute(db);
  });

  const committed = async () => (await observer.query<{ id: number }>('select id from probe order by id')).rows.map((row) => row.id);
  const insert = (trx: Kysely<Tables>, id: number, ref: number | null = null) => trx.insertInto('probe').values({ id, ref }).execute();

  it('commits what the transaction wrote, the last statement with the commit', async () => {
    const result = await pipelinedTransaction(() =>
      db.transaction().execute(async (trx) => {
        await insert(trx, 1);
        await insert(trx, 2, 1);
        await lastStatement(() => insert(trx, 3, 2));
        // Would run outside the transaction, which has committed: refused.
        return (await trx.selectFrom('probe').select('id').execute()).length;
      }),
    ).catch((error: unknown) => error);
    // The statement after lastStatement() ran outside the committed transaction: refused instead.
    assert.ok(result instanceof Error, 'a statement after the last one is refused');
    assert.deepEqual(await committed(), [1, 2, 3], 'the transaction had committed with its last statement');

    await sql`delete from probe`.execute(db);
    await pipelinedTransaction(() =>
      db.transaction().execute(async (trx) => {
        await insert(trx, 1);
        assert.deepEqual(await committed(), [], 'nothing is visible before the commit');
        await lastStatement(() => insert(trx, 2, 1));
      }),
    );
    assert.deepEqual(await committed(), [1, 2]);
  });

  it('rolls the whole transaction back when its last statement fails, with that statement’s error', async () => {
    await insert(db, 7);
    const error = await pipelinedTransaction(() =>
      db.transaction().execute(async (trx) => {
        await insert(trx, 1);
        await lastStatement(() => insert(trx, 7));
      }),
    ).catch((caught: unknown) => caught);
    assert.equal((error as { code?: string }).code, '23505', 'the unique violation of the last statement');
    assert.equal(isOutcomeUnknown(error), false);
    assert.deepEqual(await committed(), [7]);
    // A callback that catches the failure and returns: Kysely's COMMIT says it was rolled back.
    await assert.rejects(
      pipelinedTransaction(() =>
        db.transaction().execute(async (trx) => {
          await insert(trx, 1);
          await lastStatement(() => insert(trx, 7)).catch(() => undefined);
        }),
      ),
      /rolled back|ROLLBACK|aborted/i,
    );
    assert.deepEqual(await committed(), [7]);
    // The connection (the pool has one) is usable again.
    await pipelinedTransaction(() => db.transaction().execute((trx) => lastStatement(() => insert(trx, 8))));
    assert.deepEqual(await committed(), [7, 8]);
  });

  it('says when the commit itself failed, and nothing of the transaction is committed', async () => {
    const error = await pipelinedTransaction(() =>
      db.transaction().execute(async (trx) => {
        await insert(trx, 1);
        // A reference to a row that never comes: refused at COMMIT.
        await lastStatement(() => insert(trx, 2, 99));
      }),
    ).catch((caught: unknown) => caught);
    assert.equal((error as { code?: string }).code, '23503');
    assert.equal(isOutcomeUnknown(error), true);
    assert.deepEqual(await committed(), []);
    await pipelinedTransaction(() => db.transaction().execute((trx) => lastStatement(() => insert(trx, 3))));
    assert.deepEqual(await committed(), [3]);
  });

  it('rolls back when the statement sent with the BEGIN fails', async () => {
    await insert(db, 5);
    const error = await pipelinedTransaction(() =>
      db.transaction().execute(async (trx) => {
        await insert(trx, 5);
        await lastStatement(() => insert(trx, 6));
      }),
    ).catch((caught: unknown) => caught);
    assert.equal((error as { code?: string }).code, '23505');
    assert.deepEqual(await committed(), [5]);
    // A transaction that fails in its callback before any statement is rolled back too.
    await assert.rejects(
      pipelinedTransaction(() =>
        db.transaction().execute(async () => {
          throw new Error('before any statement');
        }),
      ),
      /before any statement/,
    );
    await pipelinedTransaction(() => db.transaction().execute((trx) => insert(trx, 6)));
    assert.deepEqual(await committed(), [5, 6], 'a transaction without lastStatement() commits through Kysely');
  });

  it('refuses a statement after the last, which has committed', async () => {
    const after = await pipelinedTransaction(() =>
      db.transaction().execute((trx) =>
        lastStatement(async () => {
          await insert(trx, 1);
          await insert(trx, 2);
        }),
      ),
    ).catch((caught: unknown) => caught);
    assert.match((after as Error).message, /no statement may follow it/);
    // The first went out with its COMMIT; the second was never sent. (Statements beside each
    // other in one Kysely transaction are run one after the other, so they meet the same refusal.)
    assert.deepEqual(await committed(), [1]);
  });

  it('sends the BEGIN with the first statement and the COMMIT with the last, without waiting', async () => {
    // A client of its own whose queries are recorded beneath the pipelining: when each is sent and answered.
    const events: string[] = [];
    const recorded = pipelinedDb((client) => {
      const inner = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
      (client as unknown as { query: unknown }).query = (text: unknown, values?: unknown) => {
        const label = typeof text === 'string' ? text.split(' ')[0]! : 'query';
        events.push(`send ${label}`);
        const answer = inner(text, values);
        void answer.then(
          () => events.push(`answer ${label}`),
          () => events.push(`answer ${label}`),
        );
        return answer;
      };
    });
    try {
      await pipelinedTransaction(() =>
        recorded.transaction().execute(async (trx) => {
          await insert(trx, 1);
          await insert(trx, 2);
          await lastStatement(() => insert(trx, 3));
        }),
      );
      assert.deepEqual(events, [
        'send begin',
        'send insert',
        'answer begin',
        'answer insert',
        'send insert',
        'answer insert',
        'send insert',
        'send commit',
        'answer insert',
        'answer commit',
      ]);
      assert.deepEqual(await committed(), [1, 2, 3]);
    } finally {
      await recorded.destroy();
    }
  });

  it('sends reads ahead right behind a statement, and answers them with that when they come next, else not at all', async () => {
    const events: string[] = [];
    const recorded = pipelinedDb((client) => {
      const inner = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
      (client as unknown as { query: unknown }).query = (text: unknown, values?: unknown) => {
        events.push(
          `send ${typeof text === 'string' ? text.split(' ')[0]! : 'query'}${Array.isArray(values) && values.length > 0 ? ` ${values.join(',')}` : ''}`,
        );
        return inner(text, values);
      };
    });
    try {
      await insert(db, 1);
      const ids = async (trx: Kysely<Tables>, compiled: ReturnType<typeof idsAbove>) => (await trx.executeQuery(compiled)).rows.map((row) => row.id);
      const idsAbove = (trx: Kysely<Tables>, id: number) => trx.selectFrom('probe').select('id').where('id', '>', id).orderBy('id').compile();
      const seen = await pipelinedTransaction(() =>
        recorded.transaction().execute(async (trx) => {
          const ahead = [idsAbove(trx, 0), idsAbove(trx, 1)];
          await withReadsAhead(ahead, () => insert(trx, 2));
          // Answered by what was sent behind the insert: they saw it, and nothing is sent again.
          const first = [await ids(trx, ahead[0]!), await ids(trx, ahead[1]!)];
          const again = [idsAbove(trx, 0), idsAbove(trx, 1)];
          await withReadsAhead(again, () => insert(trx, 3));
          // Another statement first: the reads sent ahead are dropped and run again in their turn.
          await insert(trx, 4);
          const second = await ids(trx, again[1]!);
          await lastStatement(() => insert(trx, 5));
          return { first, second };
        }),
      );
      assert.deepEqual(seen, { first: [[1, 2], [2]], second: [2, 3, 4] });
      assert.deepEqual(events, [
        'send begin',
        'send insert 2,',
        'send select 0',
        'send select 1',
        'send insert 3,',
        'send select 0',
        'send select 1',
        'send insert 4,',
        'send select 1',
        'send insert 5,',
        'send commit',
      ]);
      assert.deepEqual(await committed(), [1, 2, 3, 4, 5]);
    } finally {
      await recorded.destroy();
    }
  });

  it('writes the statements it sends together to the socket at once', async () => {
    /** The socket's writes (each one system call), counted from when a transaction starts. */
    let writes = 0;
    const counted = pipelinedDb((client) => {
      const stream = (client as unknown as { connection: { stream: { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void } } })
        .connection.stream;
      const [write, writev] = [stream._write.bind(stream), stream._writev.bind(stream)];
      stream._write = (...args) => {
        writes += 1;
        write(...args);
      };
      stream._writev = (...args) => {
        writes += 1;
        writev(...args);
      };
    });
    try {
      await sql`select 1`.execute(counted);
      writes = 0;
      await pipelinedTransaction(() =>
        counted.transaction().execute(async (trx) => {
          await withReadsAhead([trx.selectFrom('probe').select('id').compile()], () => insert(trx, 1));
          await trx.executeQuery(trx.selectFrom('probe').select('id').compile());
          await insert(trx, 2);
          await lastStatement(() => insert(trx, 3));
        }),
      );
      // BEGIN, the first insert and the read ahead; the second insert; the third and the COMMIT.
      assert.equal(writes, 3);
      assert.deepEqual(await committed(), [1, 2, 3]);
    } finally {
      await counted.destroy();
    }
  });

  it('says the outcome is unknown when the connection is lost while the COMMIT is on its way', async () => {
    const doomed = pipelinedDb((client) => client.on('error', () => undefined));
    try {
      let failure: unknown;
      const run = pipelinedTransaction(() =>
        doomed.transaction().execute(async (trx) => {
          await insert(trx, 1);
          const pid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
          // The last statement takes a while; its connection is cut meanwhile.
          setTimeout(() => void observer.query('select pg_terminate_backend($1)', [pid]), 200);
          await lastStatement(() => sql`insert into probe (id) select 2 from pg_sleep(2)`.execute(trx)).catch((error: unknown) => {
            failure = error;
            throw error;
          });
        }),
      );
      await assert.rejects(run);
      assert.equal(isOutcomeUnknown(failure), true, String(failure));
      // Here the server had not run the COMMIT: nothing was committed.
      assert.deepEqual(await committed(), []);
    } finally {
      await doomed.destroy();
    }
  });

  it('leaves transactions outside the scope as they are', async () => {
    await db.transaction().execute(async (trx) => {
      await insert(trx, 1);
      await lastStatement(() => insert(trx, 2));
      assert.deepEqual(await committed(), [], 'outside pipelinedTransaction(), lastStatement() does not commit');
    });
    assert.deepEqual(await committed(), [1, 2]);
  });
});
