import type { ChangeSource } from '../../src/lib/change-scoped-cache.ts';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/tables.ts';
import { bytesOfParts, SearchIndexBuilder, type ChangedUser } from '../../src/domain/search-index.ts';
import type { LoadJob, LoadResult, RunningLoad } from '../../src/search-index/loader.ts';
import { SearchIndexes, type DirectoryReads } from '../../src/search-index/search-indexes.ts';

/** Organizations as a fake loader serves them: a version and a number of users (about 70 bytes each in an index). */
type Directory = Map<
  string,
  {
    version: number;
    users: number;
    members?: number[];
    /** A room's members as a read finds them, when not `members` at `version` (a read that began before the directory moved on). */
    roomRead?: { version: number; members: number[] };
    /** The members of its rooms as a whole read of the largest finds them, largest first. */
    largestRooms?: Record<string, number[]>;
    keyLength?: number;
    changes?: { changed: ChangedUser[]; rooms: string[]; editedRooms?: string[] };
    replacedRooms?: string[];
  }
>;

/** User `seq`'s search key: no first or last name, an email that sorts by seq. */
const emailOf = (seq: number, keyLength = 45) => `user${String(seq).padStart(4, '0')}`.padEnd(keyLength - 2, '.');

/** User `seq` as read among the users changed: external or not, a member of `rooms` now (when read). */
function changedUser(seq: number, { external = false, rooms }: { external?: boolean; rooms?: string[] } = {}): ChangedUser {
  return {
    seq,
    id: `u${seq}`,
    searchKey: `\n\n${emailOf(seq)}`,
    sortKeys: { firstname: '', lastname: '', email: emailOf(seq) },
    external,
    needsInvite: false,
    candidate: true,
    ...(rooms !== undefined ? { rooms } : {}),
  };
}

function parts(version: number, users: number, keyLength = 45) {
  const builder = new SearchIndexBuilder(version, users);
  const seqs = Array.from({ length: users }, (_, i) => i + 1);
  builder.addUsers(seqs.map((seq) => ({ seq, searchKey: `\n\n${emailOf(seq, keyLength)}`, external: false, needsInvite: false, candidate: true })));
  for (const field of ['lastname', 'firstname', 'email'] as const) builder.addOrder(field, seqs);
  return builder.parts()!;
}

/**
 * Loads from `directory`; `gate`, while set, holds every load until it resolves. `copies`: the
 * copies on disk of organizations' indexes, each of a version the database lists. The reads of the
 * largest rooms' members, which follow every index held, are listed apart (`roomsJobs`).
 */
function fakeLoader(
  directory: Directory,
  options: { gate?: Promise<void>; fail?: Set<string>; copies?: Map<string, { version: number; users: number; keyLength?: number }> } = {},
) {
  const copiesRead: string[] = [];
  const jobs: LoadJob[] = [];
  const roomsJobs: Extract<LoadJob, { kind: 'rooms' }>[] = [];
  const load = (job: LoadJob): RunningLoad => {
    if (job.kind === 'rooms') roomsJobs.push(job);
    else jobs.push(job);
    let cancelled = false;
    const result = (async (): Promise<LoadResult> => {
      await options.gate;
      if (cancelled) throw new Error('cancelled');
      if (options.fail?.has(job.orgId) === true) throw new Error('database unreachable');
      const org = directory.get(job.orgId);
      if (org === undefined) return { kind: 'stale' };
      if (job.kind === 'changes') throw new Error('what changed is read in the server itself');
      if (job.kind === 'room') {
        const read = org.roomRead ?? { version: org.version, members: org.members ?? [] };
        return { kind: 'members', version: read.version, seqs: Float64Array.from(read.members) };
      }
      if (job.kind === 'rooms') {
        const rooms = Object.entries(org.largestRooms ?? {})
          .filter(([roomId]) => !job.skip.includes(roomId))
          .slice(0, job.maxRooms);
        return {
          kind: 'rooms',
          version: org.version,
          rooms: rooms.map(([roomId, seqs]) => ({ roomId, members: seqs.length })),
          seqs: Float64Array.from(rooms.flatMap(([, seqs]) => seqs)),
        };
      }
      if (org.users < job.minUsers || org.users > job.maxUsers) return { kind: 'skipped', version: org.version, users: org.users };
      return { kind: 'index', parts: parts(org.version, org.users, org.keyLength) };
    })();
    return { result, cancel: async () => void (cancelled = true) };
  };
  const reads: DirectoryReads = {
    bySize: async (minUsers) =>
      [...directory]
        .filter(([, org]) => org.users >= minUsers)
        .map(([orgId, org]) => ({ orgId, users: org.users }))
        .sort((a, b) => b.users - a.users),
    sizeOf: async (orgId) => directory.get(orgId),
    versionsOf: async (orgIds) => new Map(orgIds.flatMap((orgId) => (directory.has(orgId) ? [[orgId, directory.get(orgId)!.version]] : []))),
    changesSince: async (job) => {
      jobs.push(job);
      const org = directory.get(job.orgId);
      if (org === undefined) return { kind: 'stale' };
      return org.changes === undefined
        ? { kind: 'many changes', version: org.version, rooms: org.replacedRooms ?? [], editedRooms: [] }
        : { kind: 'changes', version: org.version, users: org.users, editedRooms: [], ...org.changes };
    },
    snapshotOf: async (orgId, version, after) => {
      const copy = options.copies?.get(orgId);
      if (copy === undefined || copy.version > version || copy.version <= after) return undefined;
      copiesRead.push(orgId);
      return parts(copy.version, copy.users, copy.keyLength);
    },
  };
  return { load, jobs, roomsJobs, reads, copiesRead };
}

const quiet = { info: () => undefined, warn: () => undefined };
const noDatabase = undefined as unknown as Kysely<Database>;

async function settled(indexes: SearchIndexes): Promise<void> {
  while (indexes.status().loading > 0) await new Promise((resolve) => setTimeout(resolve, 1));
}

describe('SearchIndexes', () => {
  it('answers only at the version loaded, and loads the new version when asked at it', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    assert.equal(indexes.index('acme', 1), undefined, 'not loaded yet: the database answers');
    await settled(indexes);
    assert.equal(indexes.index('acme', 1)?.users, 10);
    directory.set('acme', { version: 2, users: 12 });
    assert.equal(indexes.index('acme', 2), undefined, 'an index of another version is never used');
    assert.equal(indexes.index('acme', 1)?.users, 10, 'the old one still answers a lookup that read the old version, until the new one is loaded');
    await settled(indexes);
    assert.equal(indexes.index('acme', 2)?.users, 12);
    assert.equal(indexes.index('acme', 1), undefined, 'and is gone once it is');
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'changes', 'organization'],
      'what changed was asked first (too much here), then the whole index',
    );
  });

  it('takes an index from its copy on disk, without a loading process, and lays over what changed since the copy', async () => {
    const directory: Directory = new Map([['acme', { version: 3, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory, { copies: new Map([['acme', { version: 3, users: 10 }]]) });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 3);
    await settled(indexes);
    assert.equal(indexes.index('acme', 3)?.users, 10);
    assert.equal(jobs.length, 0, 'nothing was read from the database');
    await indexes.close();

    // A copy of version 3 while the database is at 4: only what changed since is read.
    const added: ChangedUser = {
      seq: 11,
      id: 'u11',
      searchKey: `\n\n${emailOf(11)}`,
      sortKeys: { firstname: '', lastname: '', email: emailOf(11) },
      external: false,
      needsInvite: false,
      candidate: true,
    };
    directory.set('acme', { version: 4, users: 11, changes: { changed: [added], rooms: [] } });
    const restarted = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    restarted.index('acme', 4);
    await settled(restarted);
    assert.equal(restarted.index('acme', 4)?.users, 11);
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['changes'],
    );
    await restarted.close();

    // Too much changed since the copy: the index is read whole after all.
    directory.set('acme', { version: 5, users: 12 });
    const again = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    again.index('acme', 5);
    await settled(again);
    assert.equal(again.index('acme', 5)?.users, 12);
    // After a whole read, what changed since it began is looked for at once.
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['changes', 'changes', 'organization', 'changes'],
    );
    await again.close();
  });

  it('takes an index too far behind to be brought up to date from a newer copy (left by an import), not by reading it whole', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const copies = new Map<string, { version: number; users: number }>();
    const { load, jobs, reads, copiesRead } = fakeLoader(directory, { copies });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization'],
    );

    // Many changes (the fake has none to lay over) and a copy of the new version: the copy is taken.
    directory.set('acme', { version: 2, users: 14 });
    copies.set('acme', { version: 2, users: 14 });
    indexes.index('acme', 2);
    await settled(indexes);
    assert.equal(indexes.index('acme', 2)?.users, 14);
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'changes'],
      'no whole read',
    );
    assert.deepEqual(copiesRead, ['acme']);

    // A copy no newer than the index held is of no use: read whole.
    directory.set('acme', { version: 3, users: 15 });
    indexes.index('acme', 3);
    await settled(indexes);
    assert.equal(indexes.index('acme', 3)?.users, 15);
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'changes', 'changes', 'organization'],
    );
    assert.deepEqual(copiesRead, ['acme'], 'the older copy was passed over');
    await indexes.close();
  });

  it('keeps the members of rooms not replaced when an index too far behind is taken from a copy or read whole', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const copies = new Map<string, { version: number; users: number }>();
    const { load, jobs, reads } = fakeLoader(directory, { copies });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    for (const roomId of ['kept', 'replaced']) indexes.members('acme', indexes.index('acme', 1)!, roomId);
    await settled(indexes);

    // Many changes, the room "replaced" among them: from the copy, "kept" keeps its members, extended to the users added.
    directory.set('acme', { version: 2, users: 14, replacedRooms: ['replaced'] });
    copies.set('acme', { version: 2, users: 14 });
    indexes.index('acme', 2);
    await settled(indexes);
    const fromCopy = indexes.index('acme', 2)!;
    const loads = jobs.length;
    assert.deepEqual(
      [1, 3, 12].map((user) => indexes.members('acme', fromCopy, 'kept')?.has(user)),
      [true, true, false],
    );
    assert.equal(indexes.members('acme', fromCopy, 'replaced'), undefined, 'read again');
    assert.deepEqual(
      jobs.slice(loads).map((job) => job.kind === 'room' && job.roomId),
      ['replaced'],
    );

    // The same when the index is read whole (no newer copy).
    directory.set('acme', { version: 3, users: 15 });
    indexes.index('acme', 3);
    await settled(indexes);
    const readWhole = indexes.index('acme', 3)!;
    assert.equal(jobs.at(-1)?.kind, 'organization');
    assert.equal(indexes.members('acme', readWhole, 'kept')?.has(3), true);
    await indexes.close();
  });

  it('preloads the largest organizations, and resolves once the copies on disk are taken, leaving whole reads to the background', async () => {
    const directory: Directory = new Map([
      ['copied', { version: 2, users: 30 }],
      ['read', { version: 1, users: 20 }],
      ['small', { version: 1, users: 3 }],
    ]);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { load, jobs, reads, copiesRead } = fakeLoader(directory, { gate, copies: new Map([['copied', { version: 2, users: 30 }]]) });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 10 }, load, quiet, reads);
    await indexes.preload();
    assert.deepEqual(copiesRead, ['copied']);
    assert.equal(indexes.index('copied', 2)?.users, 30, 'held before preload resolves');
    assert.deepEqual(
      jobs.map((job) => job.orgId),
      ['read'],
      'the whole read has started, and goes on',
    );
    assert.deepEqual(indexes.status(), { organizations: 1, loading: 2 }, "the whole read, and the copied index's largest rooms after it");
    open();
    await settled(indexes);
    assert.equal(indexes.index('read', 1)?.users, 20);
    assert.equal(indexes.index('small', 1), undefined, 'below the minimum: never loaded');
    await indexes.close();
  });

  it("does not keep a room's members in an index read at a version after which they may have been replaced", async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const options: { gate?: Promise<void> } = {};
    const { load, reads } = fakeLoader(directory, options);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    indexes.members('acme', indexes.index('acme', 1)!, 'board');
    await settled(indexes);

    // Many changes at version 2 (the room not among them): the index is read whole, and while it
    // is read, version 3 replaces the room's members. The index read is of version 3.
    let open!: () => void;
    options.gate = new Promise<void>((resolve) => (open = resolve));
    directory.set('acme', { version: 2, users: 12, members: [2, 4] });
    indexes.index('acme', 2);
    while (indexes.status().organizations > 0) await new Promise((resolve) => setTimeout(resolve, 1));
    directory.set('acme', { version: 3, users: 12, members: [5], replacedRooms: ['board'] });
    open();
    await settled(indexes);
    const index = indexes.index('acme', 3)!;
    assert.equal(indexes.members('acme', index, 'board'), undefined, 'read again, not kept from version 1');
    await settled(indexes);
    assert.deepEqual(
      [1, 3, 4].map((user) => indexes.members('acme', index, 'board')?.has(user)),
      [false, false, true],
    );
    await indexes.close();
  });

  it('preloads for a bounded time, whatever the listing or the copies take, and never rejects', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, reads } = fakeLoader(directory, { copies: new Map([['acme', { version: 1, users: 10 }]]) });
    const warnings: string[] = [];
    const log = { info: () => undefined, warn: (_details: object, message: string) => void warnings.push(message) };
    const policy = { memoryBytes: 1 << 20, minUsers: 0 };
    // Each preload must return while what it waits for has not answered: a hang would fail the test by never ending.
    const preloadThenClose = async (indexes: SearchIndexes, whenPreloaded: () => void = () => undefined) => {
      await indexes.preload(50);
      whenPreloaded();
      await indexes.close();
    };
    await preloadThenClose(new SearchIndexes(noDatabase, policy, load, log, { ...reads, bySize: () => new Promise(() => undefined) }));
    let copyAnswered = false;
    const slowCopy = {
      ...reads,
      snapshotOf: () =>
        new Promise<undefined>((resolve) =>
          setTimeout(() => {
            copyAnswered = true;
            resolve(undefined);
          }, 2_000),
        ),
    };
    await preloadThenClose(new SearchIndexes(noDatabase, policy, load, log, slowCopy), () =>
      assert.equal(copyAnswered, false, 'preload returned before a copy that takes long answered'),
    );
    await preloadThenClose(
      new SearchIndexes(noDatabase, policy, load, log, { ...reads, bySize: async () => Promise.reject(new Error('database unreachable')) }),
    );
    assert.deepEqual(warnings, ['search index: could not list the organizations to load']);
  });

  it("holds a room's members read at another version than the index's, brought to the index's version", async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    const joined = (seq: number, rooms: string[]) => changedUser(seq, { rooms });
    const membersOf = (roomId: string, version: number) =>
      [...Array(12).keys()].filter((user) => indexes.members('acme', indexes.index('acme', version)!, roomId)?.has(user));

    // Read ahead: the room is asked for at version 1, and read once version 2 (user 7 joins) has committed.
    assert.deepEqual(membersOf('board', 1), []);
    directory.set('acme', { version: 2, users: 10, members: [2, 4, 7], changes: { changed: [joined(7, ['board'])], rooms: [], editedRooms: ['board'] } });
    await settled(indexes);
    assert.deepEqual(membersOf('board', 1), [], 'not at the version of the index: pending, not read again');
    indexes.index('acme', 2);
    await settled(indexes);
    assert.deepEqual(membersOf('board', 2), [1, 3, 6], 'held once the index reached the version read');

    // Read behind: at version 3 user 2 leaves and user 9 joins the staff room, whose members were read at version 2.
    directory.set('acme', {
      version: 3,
      users: 10,
      members: [4, 9],
      roomRead: { version: 2, members: [2, 4] },
      changes: { changed: [joined(2, ['board']), joined(9, ['staff'])], rooms: [], editedRooms: ['staff'] },
    });
    indexes.index('acme', 3);
    await settled(indexes);
    assert.deepEqual(membersOf('staff', 3), []);
    await settled(indexes);
    assert.deepEqual(membersOf('staff', 3), [3, 8], "what changed since the read, from the index's log");
    assert.deepEqual(membersOf('board', 3), [1, 3, 6], 'the board room kept through the update');
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'room', 'changes', 'changes', 'room'],
    );
  });

  it('applies what changed to the index it holds, keeping the members of rooms not replaced', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const logged: string[] = [];
    const indexes = new SearchIndexes(
      noDatabase,
      { memoryBytes: 1 << 20, minUsers: 0 },
      load,
      { info: (_d, message) => logged.push(message), warn: () => undefined },
      reads,
    );
    indexes.index('acme', 1);
    await settled(indexes);
    for (const room of ['board', 'staff']) indexes.members('acme', indexes.index('acme', 1)!, room);
    await settled(indexes);
    // Version 2: user 3 became external, users 11 and 12 were added; the staff room's members were replaced.
    const changed = (seq: number, external = false) => changedUser(seq, { external });
    directory.set('acme', { version: 2, users: 12, members: [2, 4, 12], changes: { changed: [changed(3, true), changed(11), changed(12)], rooms: ['staff'] } });
    assert.equal(indexes.index('acme', 2), undefined);
    await settled(indexes);
    const index = indexes.index('acme', 2)!;
    assert.equal(index.users, 12);
    const all = index.search({ terms: ['user'], includeExternal: false, filter: {}, sortBy: 'email', direction: 'DESC', offset: 0, size: 3 });
    assert.deepEqual(all, { total: 11, seqs: [12, 11, 10] }, 'the external user is left out, the new ones sort last');
    const board = indexes.members('acme', index, 'board');
    assert.deepEqual(
      [...Array(12).keys()].filter((user) => board?.has(user)),
      [1, 3],
      'the board room kept its members',
    );
    assert.equal(indexes.members('acme', index, 'staff'), undefined, 'the staff room is read again');
    await settled(indexes);
    assert.ok(indexes.members('acme', index, 'staff')?.has(11));
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'room', 'room', 'changes', 'room'],
    );
    assert.ok(logged.includes('search index: updated with what changed'));
  });

  it('lays the memberships of changed users over the rooms edited member by member, without reading them again', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, { info: () => undefined, warn: () => undefined }, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    for (const room of ['board', 'staff']) indexes.members('acme', indexes.index('acme', 1)!, room);
    await settled(indexes);
    const changed = (seq: number, rooms: string[]) => changedUser(seq, { rooms });
    // Version 2: user 2 left the board, user 7 joined it, new user 11 joined it and the staff room.
    directory.set('acme', {
      version: 2,
      users: 11,
      changes: { changed: [changed(2, []), changed(7, ['board']), changed(11, ['board', 'staff'])], rooms: [], editedRooms: ['board', 'staff'] },
    });
    indexes.index('acme', 2);
    await settled(indexes);
    const index = indexes.index('acme', 2)!;
    const members = (room: string) => [...Array(11).keys()].filter((user) => indexes.members('acme', index, room)?.has(user));
    assert.deepEqual(members('board'), [3, 6, 10], 'seqs 4, 7 and 11');
    assert.deepEqual(members('staff'), [3, 10], 'seq 4 as loaded (the fake loads seqs 2 and 4 for every room), seq 2 a member of none now, and 11');
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'room', 'room', 'changes'],
      'no room read again',
    );
  });

  it('merges many changes laid over into the index in memory, never reading it whole for them', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 3_000, members: [5] }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 4 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    indexes.members('acme', indexes.index('acme', 1)!, 'board');
    await settled(indexes);
    const added = Array.from({ length: 2_001 }, (_, k): ChangedUser => {
      const seq = 3_001 + k;
      return {
        seq,
        id: `u${seq}`,
        searchKey: `\n\n${emailOf(seq)}`,
        sortKeys: { firstname: '', lastname: '', email: emailOf(seq) },
        external: false,
        needsInvite: false,
        candidate: true,
      };
    });
    directory.set('acme', { version: 2, users: 5_001, members: [5], changes: { changed: added, rooms: [] } });
    indexes.index('acme', 2);
    await settled(indexes);
    // Laid over at once, then merged in steps between turns of the event loop (SearchIndex.rebasedOnto
    // is tested with changes laid over meanwhile).
    for (let turn = 0; turn < 1_000 && indexes.index('acme', 2)!.changesLaidOver > 0; turn++) await new Promise((resolve) => setImmediate(resolve));
    const compacted = indexes.index('acme', 2)!;
    assert.equal(compacted.users, 5_001);
    assert.equal(compacted.changesLaidOver, 0, 'merged in');
    const board = indexes.members('acme', compacted, 'board');
    assert.ok(board !== undefined, "the rooms' members stand: users keep their numbers");
    // The next write is laid over the merged index.
    const one: ChangedUser = {
      ...added[0]!,
      seq: 5_002,
      id: 'u5002',
      searchKey: `\n\n${emailOf(5_002)}`,
      sortKeys: { firstname: '', lastname: '', email: emailOf(5_002) },
    };
    directory.set('acme', { version: 3, users: 5_002, members: [5], changes: { changed: [one], rooms: [] } });
    indexes.index('acme', 3);
    await settled(indexes);
    const next = indexes.index('acme', 3)!;
    assert.equal(next.users, 5_002);
    assert.equal(next.changesLaidOver, 1);
    assert.equal(next.search({ terms: [emailOf(5_002)], includeExternal: true, filter: {}, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }).total, 1);
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization', 'room', 'changes', 'changes'],
      'never read whole again',
    );
  });

  it('lets a lookup wait, briefly, for the index to take in what changed', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, reads } = fakeLoader(directory);
    let stuck = false;
    const changesSince: DirectoryReads['changesSince'] = (job) => (stuck ? new Promise<never>(() => undefined) : reads.changesSince(job));
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, { ...reads, changesSince });
    await indexes.catchUp('acme', 1, 60_000);
    assert.equal(indexes.status().loading, 0, 'nothing held: no wait, nothing queued');
    indexes.index('acme', 1);
    await settled(indexes);
    const added = (seq: number) => changedUser(seq);
    directory.set('acme', { version: 2, users: 11, changes: { changed: [added(11)], rooms: [] } });
    await indexes.catchUp('acme', 2, 60_000);
    assert.equal(indexes.index('acme', 2)?.users, 11, 'at the new version once the wait is over');
    await indexes.catchUp('acme', 2, 60_000);
    stuck = true;
    directory.set('acme', { version: 3, users: 12, changes: { changed: [added(11), added(12)], rooms: [] } });
    // The update never finishes (stuck): this wait returns only because it ends at its limit.
    await indexes.catchUp('acme', 3, 30);
    assert.equal(indexes.index('acme', 3), undefined);
  });

  it('lets a lookup wait through one update after another while writes keep landing', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, reads } = fakeLoader(directory);
    let release: (() => void) | undefined;
    let holding = false;
    const changesSince: DirectoryReads['changesSince'] = async (job) => {
      const answer = await reads.changesSince(job);
      if (holding) await new Promise<void>((resolve) => (release = resolve));
      return answer;
    };
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, { ...reads, changesSince });
    indexes.index('acme', 1);
    await settled(indexes);
    const added = (seq: number) => changedUser(seq);
    holding = true;
    directory.set('acme', { version: 2, users: 11, changes: { changed: [added(11)], rooms: [] } });
    indexes.index('acme', 2);
    while (release === undefined) await new Promise((resolve) => setImmediate(resolve));
    // Version 3 lands while the update to version 2 runs: the wait goes on into the next update.
    holding = false;
    directory.set('acme', { version: 3, users: 12, changes: { changed: [added(11), added(12)], rooms: [] } });
    const waited = indexes.catchUp('acme', 3, 60_000);
    release();
    await waited;
    assert.equal(indexes.index('acme', 3)?.users, 12);
    assert.equal(indexes.heldBehind('acme', 3), false);
    assert.equal(indexes.heldBehind('acme', 4), true);
  });

  it('watches the versions of the organizations held, and applies a change before any lookup asks for it', async () => {
    const directory: Directory = new Map([
      ['acme', { version: 1, users: 10 }],
      ['other', { version: 1, users: 10 }],
    ]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    let token = 1;
    const source: ChangeSource = { token: () => token, catchUp: () => undefined, about: () => source };
    indexes.watch(source, 5);
    const added: ChangedUser = {
      seq: 11,
      id: 'u11',
      searchKey: `\n\n${emailOf(11)}`,
      sortKeys: { firstname: '', lastname: '', email: emailOf(11) },
      external: false,
      needsInvite: false,
      candidate: true,
    };
    directory.set('acme', { version: 2, users: 11, changes: { changed: [added], rooms: [] } });
    directory.set('other', { version: 2, users: 10 });
    token += 1;
    while (jobs.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await settled(indexes);
    assert.deepEqual(
      jobs.map((job) => [job.kind, job.orgId]),
      [
        ['organization', 'acme'],
        ['changes', 'acme'],
      ],
      'only the organization held is looked at',
    );
    assert.equal(indexes.status().loading, 0);
    assert.equal(indexes.index('acme', 2)?.users, 11, 'ready at the new version, which no lookup had asked for');
    await indexes.close();
  });

  it('takes changes in everyMs apart at most while no lookup asks, and at once again after one does', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    let token = 1;
    const source: ChangeSource = { token: () => token, catchUp: () => undefined, about: () => source };
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    indexes.watch(source, 5, { afterMs: 50, everyMs: 2000 });
    // The first look finds nothing new; the lookup's ask is then older than afterMs.
    await sleep(100);
    const change = (version: number) => {
      directory.set('acme', { version, users: 10, changes: { changed: [], rooms: [] } });
      token += 1;
    };
    change(2);
    await sleep(300);
    assert.equal(indexes.heldBehind('acme', 2), true, 'not looked at again within everyMs of the last look');
    while (indexes.heldBehind('acme', 2)) await sleep(10);
    await settled(indexes);
    assert.equal(jobs.at(-1)?.kind, 'changes', 'taken in by its changes, everyMs after the look before');
    assert.notEqual(indexes.index('acme', 2), undefined, 'a lookup asks');
    change(3);
    const asked = performance.now();
    while (indexes.heldBehind('acme', 3)) await sleep(5);
    assert.ok(performance.now() - asked < 1000, 'after a lookup has asked, a change is taken in without waiting for everyMs');
    await indexes.close();
  });

  it('does not index an organization below the minimum or beyond the memory, until its version changes', async () => {
    const directory: Directory = new Map([
      ['small', { version: 1, users: 3 }],
      ['huge', { version: 1, users: 100_000 }],
    ]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 5 }, load, quiet, reads);
    for (const orgId of ['small', 'huge']) {
      assert.equal(indexes.index(orgId, 1), undefined);
      await settled(indexes);
      assert.equal(indexes.index(orgId, 1), undefined);
    }
    assert.equal(jobs.length, 0, 'their sizes rule them out before any loading process starts, and asked again at the same version, nothing is queued');
    directory.set('small', { version: 2, users: 6 });
    indexes.index('small', 2);
    await settled(indexes);
    assert.equal(indexes.index('small', 2)?.users, 6);
  });

  it('does not read a copy again and again that turns out not to fit, until the version changes', async () => {
    // Small enough by its count of users, too large by its keys.
    const directory: Directory = new Map([['acme', { version: 5, users: 100, keyLength: 200 }]]);
    const { load, reads, copiesRead } = fakeLoader(directory, { copies: new Map([['acme', { version: 4, users: 100, keyLength: 200 }]]) });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 10_000, minUsers: 0 }, load, quiet, reads);
    for (let k = 0; k < 5; k++) {
      assert.equal(indexes.index('acme', 5), undefined);
      await settled(indexes);
    }
    assert.deepEqual(copiesRead, ['acme']);
    directory.set('acme', { version: 6, users: 100, keyLength: 200 });
    indexes.index('acme', 6);
    await settled(indexes);
    assert.deepEqual(copiesRead, ['acme', 'acme']);
    await indexes.close();
  });

  it('drops the least recently used indexes to stay within its memory', async () => {
    // 100 users: about 7 KB each; room for two.
    const directory: Directory = new Map(['a', 'b', 'c'].map((orgId) => [orgId, { version: 1, users: 100 }]));
    const { load, reads } = fakeLoader(directory);
    const bytes = parts(1, 100);
    const size = bytesOfParts(bytes);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 2 * size + 100, minUsers: 0 }, load, quiet, reads);
    for (const orgId of ['a', 'b']) indexes.index(orgId, 1);
    await settled(indexes);
    assert.ok(indexes.index('a', 1) !== undefined, 'a is now used more recently than b');
    indexes.index('c', 1);
    await settled(indexes);
    assert.equal(indexes.status().organizations, 2);
    assert.ok(indexes.index('c', 1) !== undefined);
    assert.ok(indexes.index('a', 1) !== undefined);
    assert.equal(indexes.index('b', 1), undefined, 'b was the least recently used');
  });

  it('does not load a dropped index again until its version changes, so two that do not fit together do not push each other out', async () => {
    const directory: Directory = new Map(['a', 'b'].map((orgId) => [orgId, { version: 1, users: 100 }]));
    const { load, jobs, reads } = fakeLoader(directory);
    const one = parts(1, 100);
    const size = bytesOfParts(one);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: Math.round(1.5 * size), minUsers: 0 }, load, quiet, reads);
    indexes.index('a', 1);
    await settled(indexes);
    indexes.index('b', 1);
    await settled(indexes);
    assert.ok(indexes.index('b', 1) !== undefined);
    for (let round = 0; round < 3; round++) {
      assert.equal(indexes.index('a', 1), undefined, 'a was dropped for b');
      await settled(indexes);
    }
    assert.ok(indexes.index('b', 1) !== undefined, 'b stays');
    assert.equal(jobs.length, 2, 'one load each');
    // b grows too large to index: its old index goes, and a comes back into the memory freed.
    directory.set('b', { version: 2, users: 1_000 });
    assert.equal(indexes.index('b', 2), undefined);
    await settled(indexes);
    indexes.index('a', 1);
    await settled(indexes);
    assert.ok(indexes.index('a', 1) !== undefined, 'a is loaded again into free memory');
    directory.set('a', { version: 2, users: 100 });
    indexes.index('a', 2);
    await settled(indexes);
    assert.ok(indexes.index('a', 2) !== undefined, 'a new version is loaded');
  });

  it('drops nothing when dropping all it may would still not make room', async () => {
    // The big one's keys are longer than the 80 bytes a user the memory check before loading assumes.
    const directory: Directory = new Map([
      ['small', { version: 1, users: 20 }],
      ['big', { version: 1, users: 100, keyLength: 120 }],
    ]);
    const { load, reads } = fakeLoader(directory);
    const one = parts(1, 100, 120);
    const size = bytesOfParts(one);
    // Room for the small one and for the big one by its user count (80 bytes a user), not for the big one's real size.
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 100 * 80, minUsers: 0 }, load, quiet, reads);
    assert.ok(size > 100 * 80, `the big index (${size} bytes) is larger than the memory`);
    indexes.index('small', 1);
    await settled(indexes);
    indexes.index('big', 1);
    await settled(indexes);
    assert.equal(indexes.index('big', 1), undefined, 'the big one does not fit');
    assert.ok(indexes.index('small', 1) !== undefined, 'and the small one was not dropped for nothing');
  });

  it('keeps a newer index, and loads nothing, for a lookup that read an older version', async () => {
    const directory: Directory = new Map([['acme', { version: 2, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 2);
    await settled(indexes);
    assert.equal(indexes.index('acme', 1), undefined, 'the database answers at version 1');
    await settled(indexes);
    assert.equal(indexes.index('acme', 2)?.users, 10);
    assert.equal(jobs.length, 1);
  });

  it("loads a room's members when a filter needs them, at the index's version", async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, members: [2, 4] }]]);
    const { load, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    const index = indexes.index('acme', 1)!;
    assert.equal(indexes.members('acme', index, 'board'), undefined);
    await settled(indexes);
    const members = indexes.members('acme', index, 'board');
    assert.deepEqual(
      [0, 1, 2, 3].map((user) => members?.has(user)),
      [false, true, false, true],
    );
  });

  it('reads the members of the largest rooms as soon as the index is held, so a filter on them needs no wait', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 64, largestRooms: { big: [1, 2, 3, 5, 8], small: [13] } }]]);
    const { load, jobs, roomsJobs, reads } = fakeLoader(directory);
    const logged: string[] = [];
    const log = { info: (_d: object, message: string) => logged.push(message), warn: () => undefined };
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, log, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    const index = indexes.index('acme', 1)!;
    const big = indexes.members('acme', index, 'big');
    assert.deepEqual(
      [...Array(10).keys()].filter((user) => big?.has(user)),
      [0, 1, 2, 4, 7],
    );
    assert.ok(indexes.members('acme', index, 'small')?.has(12));
    assert.deepEqual(
      jobs.map((job) => job.kind),
      ['organization'],
      'no room read on demand',
    );
    assert.deepEqual(roomsJobs, [{ kind: 'rooms', orgId: 'acme', skip: [], maxRooms: Math.floor((1 << 20) / 8 / 8), maxMembers: 64 }]);
    assert.ok(logged.includes("search index: the largest rooms' members read"));
    await indexes.close();
  });

  it('reads no more rooms than a share of the memory holds, only into memory free, and only at the index version', async () => {
    const users = 8 * 1024;
    const rooms = { first: [1], second: [2], third: [3] };
    // An index of 8,192 users (about 600 KB) in 1 MB: rooms of 1 KB each, up to 128 KB of them.
    const directory: Directory = new Map([['acme', { version: 1, users, keyLength: 45, largestRooms: rooms }]]);
    const { load, roomsJobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    assert.equal(roomsJobs[0]?.maxRooms, 128);

    // Nearly full: none fits.
    const full = new SearchIndexes(noDatabase, { memoryBytes: bytesOfParts(parts(1, users)) + 1000, minUsers: 0 }, load, quiet, reads);
    full.index('acme', 1);
    await settled(full);
    const fullIndex = full.index('acme', 1)!;
    assert.equal(full.members('acme', fullIndex, 'first'), undefined, 'not held: read on demand, and the database answers meanwhile');
    assert.equal(roomsJobs.length, 1, 'and not even asked for');

    // Read at a version the index has moved on from: dropped.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held = fakeLoader(directory);
    const asked: LoadJob[] = [];
    const heldBack = (job: LoadJob): RunningLoad => {
      if (job.kind !== 'rooms') return held.load(job);
      asked.push(job);
      return { result: released.then(() => held.load(job).result), cancel: async () => undefined };
    };
    const moving = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, heldBack, quiet, held.reads);
    moving.index('acme', 1);
    while (asked.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    directory.set('acme', { version: 2, users, largestRooms: rooms });
    release();
    await settled(moving);
    assert.equal(moving.members('acme', moving.index('acme', 1)!, 'first'), undefined);
    await Promise.all([indexes.close(), full.close(), moving.close()]);
  });

  it('reads the largest rooms again after an import replaced the members of one it held', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10, largestRooms: { board: [2, 4] } }]]);
    const { load, roomsJobs, reads } = fakeLoader(directory);
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    await settled(indexes);
    assert.ok(indexes.members('acme', indexes.index('acme', 1)!, 'board')?.has(3));
    directory.set('acme', { version: 2, users: 10, largestRooms: { board: [5] }, changes: { changed: [], rooms: ['board'] } });
    indexes.index('acme', 2);
    await settled(indexes);
    const board = indexes.members('acme', indexes.index('acme', 2)!, 'board');
    assert.deepEqual(
      [...Array(10).keys()].filter((user) => board?.has(user)),
      [4],
    );
    assert.deepEqual(
      roomsJobs.map((job) => job.skip),
      [[], []],
    );
    await indexes.close();
  });

  it("brings an index up to date before the largest rooms' reads queued, and lets no lookup wait behind one", async () => {
    const changed: ChangedUser = {
      seq: 3,
      id: 'u3',
      searchKey: `\n\n${emailOf(3)}`,
      sortKeys: { firstname: '', lastname: '', email: emailOf(3) },
      external: true,
      needsInvite: false,
      candidate: true,
    };
    const directory: Directory = new Map<string, { version: number; users: number; largestRooms: Record<string, number[]> }>([
      ['acme', { version: 1, users: 10, largestRooms: { board: [2] } }],
      ['beta', { version: 1, users: 10, largestRooms: { staff: [3] } }],
    ]);
    const fake = fakeLoader(directory);
    const order: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const load = (job: LoadJob): RunningLoad => {
      order.push(`${job.kind} ${job.orgId}`);
      if (job.kind !== 'rooms') return fake.load(job);
      return { result: released.then(() => fake.load(job).result), cancel: async () => undefined };
    };
    const reads: DirectoryReads = {
      ...fake.reads,
      changesSince: (job) => {
        order.push(`${job.kind} ${job.orgId}`);
        return fake.reads.changesSince(job);
      },
    };
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, reads);
    indexes.index('acme', 1);
    indexes.index('beta', 1);
    while (!order.includes('rooms acme')) await new Promise((resolve) => setTimeout(resolve, 1));
    // While acme's rooms are read (beta's queued after them), acme changes.
    directory.set('acme', { version: 2, users: 10, largestRooms: { board: [2] }, changes: { changed: [changed], rooms: [] } });
    assert.equal(await indexes.catchUp('acme', 2, 1_000), false, 'no wait behind the rooms read: the database answers');
    release();
    await settled(indexes);
    assert.deepEqual(order, ['organization acme', 'organization beta', 'rooms acme', 'changes acme', 'rooms beta']);
    assert.equal(indexes.index('acme', 2)?.users, 10);
    await indexes.close();
  });

  it('after a failed load, waits before trying the organization again', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory, { fail: new Set(['acme']) });
    const warnings: string[] = [];
    const indexes = new SearchIndexes(
      noDatabase,
      { memoryBytes: 1 << 20, minUsers: 0 },
      load,
      { info: () => undefined, warn: (_d, message) => warnings.push(message) },
      reads,
    );
    indexes.index('acme', 1);
    await settled(indexes);
    indexes.index('acme', 1);
    await settled(indexes);
    assert.equal(jobs.length, 1);
    assert.equal(warnings.length, 1);
  });

  it('stops a load that runs too long, and counts it as failed', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const held = fakeLoader(directory, { gate: new Promise<void>(() => undefined) });
    const warnings: unknown[] = [];
    const indexes = new SearchIndexes(
      noDatabase,
      { memoryBytes: 1 << 20, minUsers: 0, loadTimeoutMs: 20 },
      held.load,
      { info: () => undefined, warn: (details) => warnings.push((details as { err: Error }).err.message) },
      held.reads,
    );
    indexes.index('acme', 1);
    await settled(indexes);
    assert.deepEqual(warnings, ['the load took longer than 20 ms and was stopped'], 'the stuck load was stopped');
    indexes.index('acme', 1);
    assert.equal(indexes.status().loading, 0, 'and is not tried again at once');
    assert.equal(held.jobs.length, 1);
  });

  it('is off with no memory, and close() cancels the load running', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const off = fakeLoader(directory);
    const none = new SearchIndexes(noDatabase, { memoryBytes: 0, minUsers: 0 }, off.load, quiet, off.reads);
    assert.equal(none.index('acme', 1), undefined);
    assert.equal(off.jobs.length, 0);

    let open!: () => void;
    const held = fakeLoader(directory, { gate: new Promise<void>((resolve) => (open = resolve)) });
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, held.load, quiet, held.reads);
    indexes.index('acme', 1);
    indexes.index('other', 1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const closed = indexes.close();
    open();
    await closed;
    assert.equal(indexes.index('acme', 1), undefined);
    assert.equal(held.jobs.length, 1, 'the queued load never started');
  });

  it('gives a lookup the scope read with the changes only for a room asked for, and only if that read began after the lookup arrived or nothing changed since', async () => {
    const directory: Directory = new Map([['acme', { version: 1, users: 10 }]]);
    const { load, jobs, reads } = fakeLoader(directory);
    // The scope as the change read finds it: of its version, with the rooms asked for ('gone' does not exist).
    const changesSince: DirectoryReads['changesSince'] = async (job) => {
      const read = await reads.changesSince(job);
      if (read.kind !== 'changes') return read;
      const rooms = (job.scopeRooms ?? []).filter((roomId) => roomId !== 'gone');
      const organization = { id: job.orgId, externalSignatories: false, directoryVersion: read.version, hasNonCandidates: false };
      return { ...read, scope: { organization, tallies: [], rooms: new Map(rooms.map((roomId) => [roomId, []])), asked: new Set(job.scopeRooms) } };
    };
    const indexes = new SearchIndexes(noDatabase, { memoryBytes: 1 << 20, minUsers: 0 }, load, quiet, { ...reads, changesSince });
    indexes.index('acme', 1);
    await settled(indexes);
    let token = 1;
    // A notice that arrives while the lookup catches up: the token moves then, not before.
    let late: (() => void) | undefined;
    const source: ChangeSource = {
      token: () => token,
      catchUp: () => (late === undefined ? undefined : Promise.resolve().then(late)),
      about: () => source,
    };
    indexes.watch(source, 60_000);
    const change = (version: number, user: ChangedUser) => directory.set('acme', { version, users: 10, changes: { changed: [user], rooms: [] } });
    const changesRead = () => jobs.filter((job) => job.kind === 'changes').length;

    assert.equal(await indexes.scopeAsOf('acme', 'board', performance.now(), 100), undefined, 'no room asked for yet');
    indexes.askScope('acme', 'board');
    indexes.askScope('acme', 'gone');
    change(2, { ...changedUser(3, { rooms: ['board'] }), shown: { firstname: 'Ann', lastname: 'Lee', email: 'ann@acme.example' } });
    token = 2;
    indexes.index('acme', 2);
    await settled(indexes);
    assert.equal((await indexes.scopeAsOf('acme', 'board', performance.now(), 100))?.organization.directoryVersion, 2, 'nothing changed since the read');
    assert.equal(changesRead(), 1);
    assert.equal((await indexes.scopeAsOf('acme', 'gone', performance.now(), 100))?.rooms.has('gone'), false, 'a room that does not exist');
    assert.equal(await indexes.scopeAsOf('acme', 'other', performance.now(), 100), undefined, 'a room not asked for');
    assert.equal(indexes.changedUserAt('acme', 2, 'board', 3)?.shown?.firstname, 'Ann');
    assert.equal(indexes.changedUserAt('acme', 1, 'board', 3), undefined, 'not as it was before the read');

    // A commit the token tells of: the lookup waits for a read that began after it arrived.
    change(3, changedUser(4));
    token = 3;
    const arrived = performance.now();
    assert.equal((await indexes.scopeAsOf('acme', 'board', arrived, 1000))?.organization.directoryVersion, 3);
    assert.equal(changesRead(), 2);
    assert.equal(indexes.changedUserAt('acme', 3, 'board', 3)?.shown?.email, 'ann@acme.example', 'unchanged since version 2');
    // A lookup that arrived before that read began, with nothing committed since: no read of its own.
    assert.equal((await indexes.scopeAsOf('acme', 'board', arrived, 1000))?.organization.directoryVersion, 3);
    assert.equal(changesRead(), 2);

    // A commit whose notice arrives only as the lookup catches up: never the scope read before it.
    change(4, changedUser(5));
    late = () => {
      token = 4;
    };
    assert.equal((await indexes.scopeAsOf('acme', 'board', performance.now(), 1000))?.organization.directoryVersion, 4);
    assert.equal(changesRead(), 3);
    await indexes.close();
  });
});
