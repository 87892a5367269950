import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { nameStatementsOf, preparedStatements } from '../../src/db/prepared-statements.ts';
import { freshDatabase, type TestDatabase } from '../helpers/databases.ts';

/*
 * Statements run inside preparedStatements() are named (parsed once per connection); others are
 * not; a statement whose result changes under it (another process's migration) fails once, then
 * runs unnamed.
 */
describe('named prepared statements on PostgreSQL', () => {
  let database: TestDatabase;
  let db: Kysely<{ probe: { id: number; name: string } }>;
  before(async () => {
    database = await freshDatabase('postgres');
    const pool = new pg.Pool({ connectionString: database.env['DATABASE_URL'], max: 1 });
    pool.on('connect', (client) => nameStatementsOf(client));
    db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    await sql`create table probe (id integer primary key, name text not null)`.execute(db);
    await sql`insert into probe values (1, 'one'), (2, 'two')`.execute(db);
  });
  after(async () => {
    await db.destroy();
    await database.drop();
  });

  const prepared = async () => (await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(db)).rows.map((row) => row.statement);
  const byId = (id: number) => db.selectFrom('probe').selectAll().where('id', '=', id).execute();

  it('names the statements run inside the scope only, and answers as unnamed ones do', async () => {
    assert.deepEqual(await byId(1), [{ id: 1, name: 'one' }]);
    assert.deepEqual(await prepared(), [], 'outside the scope: unnamed');
    assert.deepEqual(await preparedStatements(() => byId(2)), [{ id: 2, name: 'two' }]);
    assert.deepEqual(await preparedStatements(() => byId(1)), [{ id: 1, name: 'one' }]);
    const named = await prepared();
    assert.equal(named.length, 1);
    assert.match(named[0]!, /from "probe" where "id" = \$1/);
    // Inside a transaction begun in the scope, as the directory writer runs its batches.
    const inTransaction = await preparedStatements(() =>
      db.transaction().execute((trx) => trx.selectFrom('probe').select('name').where('id', '=', 2).execute()),
    );
    assert.deepEqual(inTransaction, [{ name: 'two' }]);
    assert.equal((await prepared()).length, 2);
  });

  it('runs a statement unnamed once its result changed under it', async () => {
    assert.deepEqual(await preparedStatements(() => byId(1)), [{ id: 1, name: 'one' }]);
    await sql`alter table probe add column note text`.execute(db);
    await assert.rejects(
      preparedStatements(() => byId(1)),
      /cached plan must not change result type/,
    );
    assert.deepEqual(await preparedStatements(() => byId(1)), [{ id: 1, name: 'one', note: null }]);
  });

  it('runs a statement unnamed once the connection lost its name (a pooler mixing connections)', async () => {
    const byName = () => db.selectFrom('probe').select('name').where('name', '=', 'two').execute();
    assert.deepEqual(await preparedStatements(byName), [{ name: 'two' }]);
    // Every name this connection had (the earlier tests' too) is gone on the server.
    await sql`deallocate all`.execute(db);
    await assert.rejects(preparedStatements(byName), (error: Error & { code?: string }) => error.code === '26000');
    assert.deepEqual(await preparedStatements(byName), [{ name: 'two' }]);
    assert.deepEqual(await prepared(), [], 'not named again');
  });
});
