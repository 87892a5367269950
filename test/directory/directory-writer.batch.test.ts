import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { changeDirectory } from '../../src/directory/directory-writer.ts';
import { DirectoryService } from '../../src/directory/directory-service.ts';
import { findRoom, findUser } from '../../src/repositories/directory-repository.ts';
import { ProblemError } from '../../src/errors.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { addApiToken, appWithHandle } from '../helpers/test-app.ts';

const CLI = { actor: 'cli' };

/**
 * Changes to one organization that wait for each other commit together (group commit): one
 * transaction, one directory version, each change seeing those before it. A change that fails
 * takes nothing of its batch with it: the batch is run again with that change alone.
 */
describe('directory writer: changes that wait commit together', () => {
  const opened = appWithHandle(DIRECTORY);
  const version = async () => Number((await opened.t.sql<{ v: number }>(sql`select directory_version as v from organizations where id = 'acme'`))[0]!.v);
  const events = async () => Number((await opened.t.sql<{ n: number }>(sql`select count(*) as n from audit_events where org_id = 'acme'`))[0]!.n);
  const orgTally = async () =>
    Number((await opened.t.sql<{ n: number }>(sql`select coalesce(sum(users), 0) as n from user_tallies where org_id = 'acme' and room_id = ''`))[0]!.n);
  const create = (id: string, email = `${id}@acme.example`) =>
    changeDirectory(opened.handle.db, 'acme', CLI, (change) =>
      change.createUser({ id, firstname: 'Batch', lastname: id, email, external: false, status: 'active', userName: null, externalId: null }),
    );

  it('commits changes asked for together in one transaction, each seeing the ones before it', async () => {
    const [v0, e0, users0] = [await version(), await events(), await orgTally()];
    const created = await Promise.all([create('b1'), create('b2'), create('b3')]);
    assert.deepEqual(
      created.map((user) => user.id),
      ['b1', 'b2', 'b3'],
    );
    // The fourth sees the first: the same id again is refused, after the others committed.
    const seen = await Promise.all([
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => (await findUser(change.trx, 'acme', 'b1'))?.lastname),
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => {
        await change.addMember('board', (await findUser(change.trx, 'acme', 'b1'))!);
        return (await findUser(change.trx, 'acme', 'b1'))!.changed_in;
      }),
    ]);
    assert.equal(seen[0], 'b1');
    assert.equal(await version(), v0 + 2, 'one version for each batch');
    assert.equal(seen[1], v0 + 2, 'the member is marked with the version of its batch');
    assert.equal(await events(), e0 + 4);
    assert.equal(await orgTally(), users0 + 3);
  });

  it('runs a batch again around a change that fails: the others are kept, the failed one leaves nothing', async () => {
    const [v0, e0, users0] = [await version(), await events(), await orgTally()];
    const outcomes = await Promise.allSettled([create('c1'), create('c2', 'c1@acme.example'), create('c3'), create('u1')]);
    assert.equal(outcomes[0].status, 'fulfilled');
    assert.equal(outcomes[2].status, 'fulfilled');
    const taken = outcomes[1].status === 'rejected' ? outcomes[1].reason : undefined;
    assert.ok(taken instanceof ProblemError && taken.code === 'email-taken', String(taken));
    const exists = outcomes[3].status === 'rejected' ? outcomes[3].reason : undefined;
    assert.ok(exists instanceof ProblemError && exists.code === 'user-exists', String(exists));
    assert.equal(await findUser(opened.handle.db, 'acme', 'c2'), undefined);
    assert.equal((await findUser(opened.handle.db, 'acme', 'c3'))?.email, 'c3@acme.example');
    // Run again around each failure, each change that succeeded here spent a version of its own.
    assert.equal(await version(), v0 + 2);
    assert.equal(await events(), e0 + 2);
    assert.equal(await orgTally(), users0 + 2);
  });

  it('spends no version on a batch that changes nothing, and still answers what its changes read', async () => {
    const v0 = await version();
    const [member, again] = await Promise.all([
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => change.addMember('board', (await findUser(change.trx, 'acme', 'b1'))!)),
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => change.addMember('board', (await findUser(change.trx, 'acme', 'b1'))!)),
    ]);
    assert.deepEqual([member, again], [false, false]);
    assert.equal(await version(), v0);
  });

  it('tells apart the states of a room that member changes of one batch leave (what a SCIM group ETag is made of)', async () => {
    /** Member changes, and what the room's version (a SCIM group's ETag) is made of right after them, in their transaction. */
    const members = (changes: [userId: string, add: boolean][]) =>
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => {
        for (const [userId, add] of changes) {
          const user = (await findUser(change.trx, 'acme', userId))!;
          assert.ok(add ? await change.addMember('board', user) : await change.removeMember('board', user));
        }
        const room = (await findRoom(change.trx, 'acme', 'board'))!;
        return JSON.stringify([room.members_changed_in, room.members_edited_in, room.member_edits, room.member_count, room.updated_at]);
      });
    await members([['b2', true]]);
    const v0 = await version();
    // One batch: b3 comes in; then c1 comes in and b2 goes out. The count, the directory version
    // and the timestamp are the same after each.
    const [afterAdd, afterSwap] = await Promise.all([
      members([['b3', true]]),
      members([
        ['c1', true],
        ['b2', false],
      ]),
    ]);
    assert.equal(await version(), v0 + 1, 'one batch');
    assert.notEqual(afterAdd, afterSwap);
    const { secret } = await addApiToken(opened.t, 'acme');
    const group = await opened.t.app.inject({ url: '/scim/v2/organizations/acme/Groups/board', headers: { authorization: `Bearer ${secret}` } });
    assert.equal(group.statusCode, 200, group.body);
    assert.deepEqual(
      group
        .json<{ members: { value: string }[] }>()
        .members.map((m) => m.value)
        .sort(),
      ['b1', 'b3', 'c1', 'u1'],
    );
  });

  it('reads ahead what the changes of a batch read first, and never a row that a change before it in the batch wrote', async () => {
    const directory = new DirectoryService(opened.handle.db, 100);
    await Promise.all([create('r1'), create('r2')]);
    const v0 = await version();
    // One batch: the changes that say what they touch are read for with its first statement,
    // those of a user written before them in the batch, or after a change that says nothing
    // (here a bare one, as SCIM's group changes are), are read in their turn.
    const answers = await Promise.allSettled([
      directory.patchUser('acme', 'r1', { lastname: 'First' }, undefined, CLI),
      directory.setMember('acme', 'board', 'r1', true, undefined, CLI),
      directory.patchUser('acme', 'r1', { firstname: 'Third' }, undefined, CLI),
      directory.patchUser('acme', 'nobody', { firstname: 'Never' }, undefined, CLI),
      directory.setMember('acme', 'no-room', 'r2', true, undefined, CLI),
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) =>
        change.updateUser((await findUser(change.trx, 'acme', 'r2'))!, userOf(await findUser(change.trx, 'acme', 'r2'), { lastname: 'Bare' })),
      ),
      directory.patchUser('acme', 'r2', { firstname: 'After' }, undefined, CLI),
    ]);
    const [first, member, third, nobody, noRoom, bare, after] = answers;
    assert.equal(first.status, 'fulfilled');
    assert.equal(member.status, 'fulfilled');
    assert.ok(third.status === 'fulfilled' && third.value.body.lastname === 'First' && third.value.body.firstname === 'Third', JSON.stringify(third));
    assert.ok(nobody.status === 'rejected' && (nobody.reason as ProblemError).code === 'user-not-found', String(nobody));
    assert.ok(noRoom.status === 'rejected' && (noRoom.reason as ProblemError).code === 'room-not-found', String(noRoom));
    assert.equal(bare.status, 'fulfilled');
    assert.ok(after.status === 'fulfilled' && after.value.body.lastname === 'Bare' && after.value.body.firstname === 'After', JSON.stringify(after));
    const r1 = (await findUser(opened.handle.db, 'acme', 'r1'))!;
    assert.deepEqual([r1.firstname, r1.lastname], ['Third', 'First']);
    const r2 = (await findUser(opened.handle.db, 'acme', 'r2'))!;
    assert.deepEqual([r2.firstname, r2.lastname], ['After', 'Bare']);
    assert.equal((await opened.t.sql(sql`select 1 from room_members where org_id = 'acme' and room_id = 'board' and user_id = 'r1'`)).length, 1);
    // Each refused change was run again alone, the ones before it together: two versions in all.
    assert.equal(await version(), v0 + 2);
  });

  it('refuses a write outside what the change said it touches, writing nothing', async () => {
    await create('g1');
    const v0 = await version();
    const outcomes = await Promise.allSettled([
      changeDirectory(
        opened.handle.db,
        'acme',
        CLI,
        async (change) =>
          change.updateUser((await findUser(change.trx, 'acme', 'u1'))!, userOf(await findUser(change.trx, 'acme', 'u1'), { lastname: 'Other' })),
        { userId: 'g1', readsUser: false },
      ),
      changeDirectory(opened.handle.db, 'acme', CLI, async (change) => change.createRoom({ id: 'said-not', name: 'No' }), { userId: 'g1', readsUser: false }),
    ]);
    for (const outcome of outcomes)
      assert.ok(outcome.status === 'rejected' && /said it writes user "g1" only/.test(String(outcome.reason)), String(outcome.status));
    assert.equal((await findUser(opened.handle.db, 'acme', 'u1'))?.lastname, 'Müller');
    assert.equal(await findRoom(opened.handle.db, 'acme', 'said-not'), undefined);
    assert.equal(await version(), v0);
  });

  it('fails only the change whose read ahead the database refuses: the others of its batch are run again and kept', async () => {
    const directory = new DirectoryService(opened.handle.db, 100);
    await Promise.all([create('f1'), create('f2')]);
    // A NUL, which PostgreSQL refuses in any text (the HTTP routes answer such an id 404 before this).
    const [first, refused, second] = await Promise.allSettled([
      directory.patchUser('acme', 'f1', { lastname: 'Kept' }, undefined, CLI),
      directory.patchUser('acme', 'f\0', { lastname: 'Never' }, undefined, CLI),
      directory.setMember('acme', 'board', 'f2', true, undefined, CLI),
    ]);
    assert.equal(first.status, 'fulfilled', String(first.status === 'rejected' ? first.reason : ''));
    assert.equal(second.status, 'fulfilled', String(second.status === 'rejected' ? second.reason : ''));
    assert.equal(refused.status, 'rejected');
    assert.equal((await findUser(opened.handle.db, 'acme', 'f1'))?.lastname, 'Kept');
    assert.equal((await opened.t.sql(sql`select 1 from room_members where org_id = 'acme' and room_id = 'board' and user_id = 'f2'`)).length, 1);
  });

  it('answers every change of a batch for an unknown organization with 404', async () => {
    const outcomes = await Promise.allSettled([1, 2].map(() => changeDirectory(opened.handle.db, 'nowhere', CLI, async () => 'never')));
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.equal((outcome.reason as ProblemError).code, 'organization-not-found');
    }
  });
});

/** The stored user as the writer writes it, with `fields` changed. */
function userOf(row: Awaited<ReturnType<typeof findUser>>, fields: { lastname: string }) {
  const user = row!;
  return {
    id: user.id,
    firstname: user.firstname,
    lastname: fields.lastname,
    email: user.email,
    external: user.external === 1,
    status: user.status as 'active',
    userName: user.user_name,
    externalId: user.external_id,
  };
}
