import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { demoDirectory } from '../../src/demo/sample-directory.ts';
import { searchTerms } from '../../src/domain/fold.ts';
import { signatoryFilter, PURPOSES, SORT_FIELDS, type Purpose } from '../../src/domain/signatory-rules.ts';
import {
  countSignatories,
  findFewMatches,
  findSignatories,
  findUsersBySeq,
  findUsersWithChangesBySeq,
  asAtVersion,
  type CandidateCriteria,
} from '../../src/repositories/signatory-repository.ts';
import { changeDirectory } from '../../src/directory/directory-writer.ts';
import { PageUserReads } from '../../src/services/page-user-reads.ts';
import { findUserRow } from '../../src/repositories/directory-repository.ts';
import { appWithHandle } from '../helpers/test-app.ts';

/** What a lookup in the demo organization's room asks for: the purpose's filter and the words as search terms. */
function demoCriteria(roomId: string, purpose: Purpose | undefined, words: readonly string[]): CandidateCriteria {
  return { orgId: 'demo', roomId, includeExternal: true, filter: signatoryFilter({ purpose }), terms: searchTerms(words.join(' ')), hasNonCandidates: false };
}

describe('signatory repository: both page plans give the same rows', () => {
  const opened = appWithHandle(demoDirectory());

  it('walking the sort index and starting from the search index agree', async () => {
    const words = ['mul', 'ller', 'anna', 'demo', 'partner', 'ü', 'o', 'ja', 'son', '.1', '@', 'x"y', 'zzz'];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...words), { maxLength: 3 }),
        fc.option(fc.constantFrom(...PURPOSES), { nil: undefined }),
        fc.constantFrom(...SORT_FIELDS),
        fc.constantFrom('ASC' as const, 'DESC' as const),
        fc.constantFrom('board', 'contracts'),
        fc.integer({ min: 0, max: 3 }),
        async (terms, purpose, by, direction, roomId, page) => {
          const criteria = demoCriteria(roomId, purpose, terms);
          const sort = { by, direction };
          const walked = await findSignatories(opened.handle.db, criteria, sort, 7, page * 7, 'walk-sort-index');
          const searched = await findSignatories(opened.handle.db, criteria, sort, 7, page * 7, 'from-search-index');
          assert.deepEqual(searched, walked);
          const count = await countSignatories(opened.handle.db, criteria);
          assert.ok(walked.length === Math.max(0, Math.min(7, count - page * 7)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('one pass over few matches gives the exact total and the same page, and gives up beyond its bound', async () => {
    // Short terms (a scan), longer ones (the search index), and characters LIKE and FTS5 treat specially.
    const terms = ['a', 'ü', 'o', 'ja', '.1', '@', 'x', 'zz', 'er', '.', 'mul', 'ller', 'anna', 'demo', 'partner', '%', '_', '\\', 'a%b', 'x"y'];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...terms), { minLength: 1, maxLength: 2 }),
        fc.option(fc.constantFrom(...PURPOSES), { nil: undefined }),
        fc.constantFrom(...SORT_FIELDS),
        fc.constantFrom('ASC' as const, 'DESC' as const),
        fc.constantFrom('board', 'contracts'),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 300 }),
        async (chosen, purpose, by, direction, roomId, page, upTo) => {
          const criteria = demoCriteria(roomId, purpose, chosen);
          const sort = { by, direction };
          // Every match, found by walking the sort index: a plan that shares nothing with the one pass.
          const all = await findSignatories(opened.handle.db, criteria, sort, 10_000, 0, 'walk-sort-index');
          const few = await findFewMatches(opened.handle.db, criteria, sort, 7, page * 7, upTo);
          if (all.length > upTo) {
            assert.equal(few, undefined, `${all.length} matches, bound ${upTo}`);
            return;
          }
          assert.equal(few?.total, all.length);
          assert.deepEqual(few?.rows, all.slice(page * 7, page * 7 + 7));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('reads users by seq as they were at a directory version, until one of them or the room’s member list changes', async () => {
    const criteria = demoCriteria('board', undefined, []);
    const users = await opened.handle.db.selectFrom('users').select(['seq', 'id']).where('org_id', '=', 'demo').orderBy('seq', 'desc').limit(600).execute();
    const seqs = users.map((user) => Number(user.seq));
    const versionNow = async () =>
      Number(
        (await opened.handle.db.selectFrom('organizations').select('directory_version').where('id', '=', 'demo').executeTakeFirstOrThrow()).directory_version,
      );
    const version = await versionNow();
    const findUsersBySeqAt = async (wanted: number[], at: number) =>
      asAtVersion(await findUsersWithChangesBySeq(opened.handle.db, 'demo', 'board', wanted), wanted, at);
    const atVersion = await findUsersBySeqAt(seqs, version);
    assert.deepEqual(
      atVersion?.map((row) => row.id),
      users.map((user) => user.id),
      'every user, in the order of the seqs (more than one statement of them)',
    );
    assert.deepEqual(atVersion, await findUsersBySeq(opened.handle.db, criteria, seqs));
    assert.equal(await findUsersBySeqAt([...seqs, 2_000_000_000], version), undefined, 'a seq not in the organization');

    // One user renamed through the directory writer: the others are still as they were at the version.
    const renamed = (await findUserRow(opened.handle.db, 'demo', users[3]!.id))!;
    await changeDirectory(opened.handle.db, 'demo', { actor: 'test' }, (change) =>
      change.updateUser(renamed, {
        id: renamed.id,
        firstname: renamed.firstname,
        lastname: 'Renamed',
        email: renamed.email,
        external: renamed.external === 1,
        status: 'active',
        userName: null,
        externalId: null,
      }),
    );
    assert.ok((await versionNow()) > version);
    assert.equal(await findUsersBySeqAt(seqs, version), undefined, 'the page holds a user changed since');
    const others = seqs.filter((_, k) => k !== 3);
    assert.deepEqual(
      await findUsersBySeqAt(others, version),
      atVersion.filter((_, k) => k !== 3),
      'the users not changed since',
    );
    assert.equal((await findUsersBySeqAt([seqs[3]!], await versionNow()))?.[0]?.lastname, 'Renamed');

    // Pages asked for in one turn share one read, each answered as at its own version.
    const reads = new PageUserReads(opened.handle.db);
    const statements: string[] = [];
    const counted = opened.handle.db.withPlugin({
      transformQuery: (args) => (statements.push(args.node.kind), args.node),
      transformResult: async (args) => args.result,
    });
    const shared = new PageUserReads(counted);
    const newVersion = await versionNow();
    const [first, second, third] = await Promise.all([
      shared.read('demo', 'board', seqs.slice(0, 20), version),
      shared.read('demo', 'board', seqs.slice(10, 30), newVersion),
      shared.read('demo', 'board', seqs.slice(4, 9), version),
    ]);
    assert.equal(statements.length, 1, 'one statement for the three pages');
    assert.deepEqual(first, await reads.read('demo', 'board', seqs.slice(0, 20), version), 'as one read alone');
    assert.equal(first, undefined, 'the renamed user is on the first page: not as at the old version');
    assert.deepEqual(second, await findUsersBySeq(opened.handle.db, criteria, seqs.slice(10, 30)));
    assert.deepEqual(third, atVersion.slice(4, 9), 'users not changed since, as at the old version');
  });
});

describe('signatory repository: users read as at a version after a room comes back', () => {
  const users = [
    { id: 'u1', firstname: 'Anna', lastname: 'Muller', email: 'anna@x.test' },
    { id: 'u2', firstname: 'Ben', lastname: 'Smith', email: 'ben@x.test' },
  ];
  const opened = appWithHandle({ organizations: [{ id: 'o', name: 'O', users, rooms: [{ id: 'r', name: 'R', members: ['u1'] }] }] });

  it('never reads a member as at a version before its room was deleted and listed again by an import without members', async () => {
    const versionNow = async () =>
      Number(
        (await opened.handle.db.selectFrom('organizations').select('directory_version').where('id', '=', 'o').executeTakeFirstOrThrow()).directory_version,
      );
    const seqs = (await opened.handle.db.selectFrom('users').select('seq').where('org_id', '=', 'o').orderBy('seq').execute()).map((row) => Number(row.seq));
    const version = await versionNow();
    const atVersion = asAtVersion(await findUsersWithChangesBySeq(opened.handle.db, 'o', 'r', seqs), seqs, version);
    assert.equal(atVersion?.[0]?.roomMember, true, 'u1 is a member of r');

    await changeDirectory(opened.handle.db, 'o', { actor: 'test' }, (change) => change.deleteRoom('r'));
    await opened.t.importDirectory({ organizations: [{ id: 'o', name: 'O', users, rooms: [{ id: 'r', name: 'R' }] }] });
    assert.equal(
      asAtVersion(await findUsersWithChangesBySeq(opened.handle.db, 'o', 'r', seqs), seqs, version),
      undefined,
      'the room’s member list is new since',
    );
    assert.equal(asAtVersion(await findUsersWithChangesBySeq(opened.handle.db, 'o', 'r', seqs), seqs, await versionNow())?.[0]?.roomMember, false);
  });
});
