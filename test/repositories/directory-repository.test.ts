import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { findRoomAndUser, findUser, usersAndRoomsByIds } from '../../src/repositories/directory-repository.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { appWithHandle } from '../helpers/test-app.ts';

describe('directory repository: the reads the writer sends ahead', () => {
  const opened = appWithHandle(DIRECTORY);

  it('read what findUser and findRoomAndUser read, for any number of ids, on each database', async () => {
    const db = opened.handle.db;
    await sql`update users set status = 'deleted' where org_id = 'acme' and id = 'u2'`.execute(db);
    const userIds = ['u1', 'u2', 'nobody', "o'quote"];
    const roomIds = ['board', 'lobby', 'nowhere'];
    const ahead = usersAndRoomsByIds(db, 'acme', userIds, roomIds);
    const users = (await db.executeQuery(ahead.users!)).rows;
    const rooms = (await db.executeQuery(ahead.rooms!)).rows.map((room) => room.id);
    for (const id of userIds)
      assert.deepEqual(
        users.find((user) => user.id === id),
        await findUser(db, 'acme', id),
        id,
      );
    for (const id of roomIds) assert.equal(rooms.includes(id), (await findRoomAndUser(db, 'acme', id, 'u1')).roomExists, id);
    assert.equal(users.length, 1, 'a deleted user is not read, as findUser does not');
    // One statement text whatever the number of ids (named once on PostgreSQL).
    assert.equal(usersAndRoomsByIds(db, 'acme', ['u1'], ['board']).users!.sql, ahead.users!.sql);
    assert.equal(usersAndRoomsByIds(db, 'acme', [], []).users, undefined);
  });
});
