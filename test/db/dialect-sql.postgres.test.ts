import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { withParallelScans } from '../../src/db/dialect-sql.ts';
import type { Database } from '../../src/db/tables.ts';
import { freshDatabase, type TestDatabase } from '../helpers/databases.ts';

/*
 * The passes that test a search term on many users may use parallel workers;
 * the rest of the lookup's transaction, and the connection afterwards, plan as
 * the server is configured.
 */
describe('parallel scans for search passes', () => {
  let database: TestDatabase;
  let db: Kysely<Database>;
  before(async () => {
    database = await freshDatabase('postgres');
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.env['DATABASE_URL'], max: 1 }) }) });
  });
  after(async () => {
    await db.destroy();
    await database.drop();
  });

  const costs = async (trx: Kysely<Database>) =>
    (
      await sql<{
        setup: string;
        tuple: string;
      }>`select current_setting('parallel_setup_cost') as setup, current_setting('parallel_tuple_cost') as tuple`.execute(trx)
    ).rows[0]!;

  it('makes parallel plans cheap inside the pass only', async () => {
    const server = await costs(db);
    await db.transaction().execute(async (trx) => {
      const inside = await withParallelScans(trx, () => costs(trx));
      assert.deepEqual(inside, { setup: '0', tuple: '0' });
      assert.deepEqual(await costs(trx), server, 'restored for the rest of the transaction');
    });
    assert.deepEqual(await costs(db), server, 'the connection is as before');
  });

  it('restores the settings when the pass fails, and reports a failed statement as it was', async () => {
    const server = await costs(db);
    await db.transaction().execute(async (trx) => {
      await assert.rejects(
        withParallelScans(trx, () => Promise.reject(new Error('the pass failed'))),
        /the pass failed/,
      );
      assert.deepEqual(await costs(trx), server);
    });
    await assert.rejects(
      db.transaction().execute((trx) => withParallelScans(trx, () => sql`select 1 / 0`.execute(trx))),
      /division by zero/,
    );
  });
});
