import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { compiledOnce } from '../../src/db/compiled-once.ts';
import { ACME, DIRECTORY } from '../helpers/fixtures.ts';
import { appWithHandle } from '../helpers/test-app.ts';

/*
 * A statement built once and run with its arguments bound answers as the statement built for
 * those arguments does; one whose argument went into the text is refused when first run.
 */
describe('statements built once (compiled-once.ts)', () => {
  const opened = appWithHandle(DIRECTORY);

  const usersOf = compiledOnce(['orgId', 'pattern'], (db, { orgId, pattern }) =>
    db
      .selectFrom('users')
      .select(['id', 'email'])
      .where('org_id', '=', orgId)
      .where('email', 'like', pattern)
      .where('status', 'in', ['active', 'pending'])
      .orderBy('id'),
  );

  it('binds each argument where its marker stood, and the values the builder fixed as they were', async () => {
    const db = opened.handle.db;
    for (const pattern of ['%', '%@%', 'nobody%']) {
      const built = await db
        .selectFrom('users')
        .select(['id', 'email'])
        .where('org_id', '=', ACME.id)
        .where('email', 'like', pattern)
        .where('status', 'in', ['active', 'pending'])
        .orderBy('id')
        .execute();
      assert.deepEqual(await usersOf(db, { orgId: ACME.id, pattern }), built, pattern);
    }
    assert.ok((await usersOf(db, { orgId: ACME.id, pattern: '%' })).length > 0, 'the fixture has users');
    assert.deepEqual(await usersOf(db, { orgId: 'no-such-org', pattern: '%' }), []);
  });

  // SQLite's rows have no prototype.
  const plain = (rows: readonly object[]) => rows.map((row) => ({ ...row }));

  it('runs a sql template, inside a transaction too', async () => {
    const organizationOf = compiledOnce(['orgId'], (_db, { orgId }) => sql<{ id: string }>`select id from organizations where id = ${orgId}`);
    assert.deepEqual(plain(await organizationOf(opened.handle.db, { orgId: ACME.id })), [{ id: ACME.id }]);
    const inTransaction = await opened.handle.db.transaction().execute((trx) => organizationOf(trx, { orgId: ACME.id }));
    assert.deepEqual(plain(inTransaction), [{ id: ACME.id }]);
  });

  it('refuses a statement whose argument is not a parameter', async () => {
    const inlined = compiledOnce(['orgId'], (_db, { orgId }) => sql<{ id: string }>`select id from organizations where id = ${sql.lit(orgId)}`);
    await assert.rejects(inlined(opened.handle.db, { orgId: ACME.id }), /orgId not bound as a parameter/);
    // Bound once as it is and once in the text, or made into a value of its own: refused too.
    const twice = compiledOnce(['orgId'], (_db, { orgId }) => sql<{ id: string }>`select id from organizations where id = ${orgId} or id = ${sql.lit(orgId)}`);
    await assert.rejects(twice(opened.handle.db, { orgId: ACME.id }), /went into the text/);
    const pattern = compiledOnce(['orgId'], (db, { orgId }) =>
      db.selectFrom('organizations').select('id').where('id', '=', orgId).where('name', 'like', `%${orgId}%`),
    );
    await assert.rejects(pattern(opened.handle.db, { orgId: ACME.id }), /into a value of its own/);
  });
});
