import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { demoDirectory } from '../../src/demo/sample-directory.ts';
import { changeDirectory } from '../../src/directory/directory-writer.ts';
import { findLookupScope, findUserRow, roomScopeOf } from '../../src/repositories/directory-repository.ts';
import { readChangesAtOnce } from '../../src/repositories/search-index-repository.ts';
import type { Tally } from '../../src/domain/signatory-rules.ts';
import { appWithHandle } from '../helpers/test-app.ts';

/** Tallies in one order, to compare two reads of them. */
function sorted(tallies: readonly Tally[]): Tally[] {
  const key = (tally: Tally) => `${tally.external}${tally.needsInvitation}${tally.candidate}`;
  return [...tallies].sort((a, b) => (key(a) < key(b) ? -1 : 1));
}

describe('search index repository: the scope read with the changes', () => {
  const opened = appWithHandle(demoDirectory());

  it('is what a lookup reads for each room asked for, a room that does not exist included, at the version of the changes', async () => {
    const db = opened.handle.db;
    // A suspended user: the organization then has users no lookup may list, and its tallies say so.
    const suspended = (await db.selectFrom('users').select('id').where('org_id', '=', 'demo').orderBy('seq').executeTakeFirstOrThrow()).id;
    const user = (await findUserRow(db, 'demo', suspended))!;
    await changeDirectory(db, 'demo', { actor: 'test' }, (change) =>
      change.updateUser(user, {
        id: user.id,
        firstname: user.firstname,
        lastname: user.lastname,
        email: user.email,
        external: user.external === 1,
        status: 'suspended',
        userName: null,
        externalId: null,
      }),
    );
    const asked = ['board', 'contracts', 'no-such-room'];
    const read = (await readChangesAtOnce(db, 'demo', 0, 100_000, asked))!;
    assert.deepEqual([...read.scope.asked].sort(), [...asked].sort());
    assert.ok(read.scope.organization.hasNonCandidates);
    assert.equal(read.scope.organization.directoryVersion, read.size.version);
    assert.equal(
      read.size.users,
      read.scope.tallies.reduce((sum, tally) => sum + tally.users, 0),
    );
    for (const roomId of asked) {
      const expected = (await findLookupScope(db, 'demo', roomId))!;
      const got = roomScopeOf(read.scope, roomId)!;
      assert.deepEqual(got.organization, expected.organization, roomId);
      assert.equal(got.roomExists, expected.roomExists, roomId);
      assert.deepEqual(sorted(got.tallies.organization), sorted(expected.tallies.organization), roomId);
      assert.deepEqual(sorted(got.tallies.members), sorted(expected.tallies.members), roomId);
    }
    assert.ok((await findLookupScope(db, 'demo', 'board'))!.tallies.members.length > 0, 'the room has members to compare');
    assert.equal(roomScopeOf(read.scope, 'a-room-not-asked-for'), undefined, 'a room not asked for is not answered for');
  });

  it('asks for no room when none is given, and reads nothing of an unknown organization', async () => {
    const db = opened.handle.db;
    const read = (await readChangesAtOnce(db, 'demo', 0, 10))!;
    assert.equal(read.scope.rooms.size, 0);
    assert.equal(roomScopeOf(read.scope, 'board'), undefined);
    assert.equal(await readChangesAtOnce(db, 'no-such-organization', 0, 10, ['board']), undefined);
  });
});
