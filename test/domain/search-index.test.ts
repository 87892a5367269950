import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SearchIndex, SearchIndexBuilder, type IndexedUser } from '../../src/domain/search-index.ts';
import { matchesFilter, type SignatoryFilter, type SortDirection, type SortField } from '../../src/domain/signatory-rules.ts';

interface User extends IndexedUser {
  member: boolean;
  /** Where the user stands in each sort order (the database decides it; here, at random). */
  rank: Record<SortField, number>;
}

const PIECES = ['an', 'ä', 'ß', 'ss', '😀', 'x', '\n', 'é', '.', 'b'];
const keyArb = fc.array(fc.constantFrom(...PIECES), { maxLength: 6 }).map((parts) => parts.join(''));

const usersArb = fc
  .array(fc.record({ searchKey: keyArb, external: fc.boolean(), needsInvite: fc.boolean(), member: fc.boolean(), gap: fc.integer({ min: 1, max: 5 }) }), { maxLength: 60 })
  .chain((rows) =>
    fc
      .record({
        lastname: fc.shuffledSubarray([...rows.keys()], { minLength: rows.length, maxLength: rows.length }),
        firstname: fc.shuffledSubarray([...rows.keys()], { minLength: rows.length, maxLength: rows.length }),
        email: fc.shuffledSubarray([...rows.keys()], { minLength: rows.length, maxLength: rows.length }),
      })
      .map((orders) => {
        let seq = 0;
        return rows.map((row, index): User => {
          seq += row.gap;
          const rank = { lastname: orders.lastname.indexOf(index), firstname: orders.firstname.indexOf(index), email: orders.email.indexOf(index) };
          return { seq, searchKey: row.searchKey, external: row.external, needsInvite: row.needsInvite, member: row.member, rank };
        });
      }),
  );

const FIELDS: SortField[] = ['lastname', 'firstname', 'email'];

/** Builds the index as the loader does: users in pieces, then each order in pieces. */
function build(users: readonly User[], piece = 7): SearchIndex {
  const builder = new SearchIndexBuilder(3, users.length);
  for (let at = 0; at < users.length; at += piece) builder.addUsers(users.slice(at, at + piece));
  for (const field of FIELDS) {
    const order = [...users].sort((a, b) => a.rank[field] - b.rank[field]).map((user) => user.seq);
    for (let at = 0; at < order.length; at += piece) builder.addOrder(field, order.slice(at, at + piece));
  }
  const parts = builder.parts();
  assert.ok(parts !== undefined);
  return new SearchIndex(parts);
}

function model(users: readonly User[], search: { terms: string[]; includeExternal: boolean; filter: SignatoryFilter; sortBy: SortField; direction: SortDirection; offset: number; size: number }) {
  const matching = users
    .filter((user) => search.terms.every((term) => user.searchKey.includes(term)))
    .filter((user) => matchesFilter({ external: user.external, needsInvitation: user.needsInvite, roomMember: user.member }, search.includeExternal, search.filter))
    .sort((a, b) => (a.rank[search.sortBy] - b.rank[search.sortBy]) * (search.direction === 'ASC' ? 1 : -1));
  return { total: matching.length, seqs: matching.slice(search.offset, search.offset + search.size).map((user) => user.seq) };
}

const searchArb = fc.record({
  terms: fc.array(fc.oneof(keyArb.filter((key) => key !== ''), fc.constantFrom('a', 'n', 's', '\u00e4')), { maxLength: 3 }),
  includeExternal: fc.boolean(),
  filter: fc.record({ roomMember: fc.boolean(), requiresInvitation: fc.boolean(), external: fc.constant(false as const) }, { requiredKeys: [] }),
  sortBy: fc.constantFrom(...FIELDS),
  direction: fc.constantFrom<SortDirection>('ASC', 'DESC'),
  offset: fc.nat(40),
  size: fc.integer({ min: 1, max: 30 }),
});

describe('SearchIndex', () => {
  it('counts and pages exactly like a plain filter and sort of the same users', () => {
    fc.assert(
      fc.property(usersArb, searchArb, (users, search) => {
        const index = build(users);
        const members = index.roomMembers(users.filter((user) => user.member).map((user) => user.seq));
        assert.ok(members !== undefined);
        assert.deepEqual(index.search({ ...search, members }), model(users, search));
      }),
      { numRuns: 400 },
    );
  });

  it('checks further terms user by user or by another pass, with the same answer', () => {
    // 40 users, all holding "an": the second term is checked on each (dense) or on the few ("ss" only in a few).
    const users = Array.from({ length: 40 }, (_, i): User => ({
      seq: i + 1,
      searchKey: i % 10 === 0 ? `an\nss${i}` : `an\nb${i}`,
      external: false,
      needsInvite: false,
      member: false,
      rank: { lastname: i, firstname: i, email: i },
    }));
    const index = build(users);
    const ask = (terms: string[]) => index.search({ terms, includeExternal: true, filter: {}, sortBy: 'lastname', direction: 'ASC', offset: 0, size: 50 });
    assert.deepEqual(ask(['an', 'ss']).seqs, [1, 11, 21, 31]);
    assert.deepEqual(ask(['ss1', 'an']).seqs, [11]);
    assert.deepEqual(ask(['ss1', 'b']).seqs, []);
    assert.deepEqual(ask(['an', 'b']).total, 36);
    assert.deepEqual(ask(['an', '1']).seqs, [2, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 32]);
  });

  it('never matches a term across two users, or with U+0000', () => {
    const users: User[] = ['ab', 'cd'].map((searchKey, i) => ({ seq: i + 1, searchKey, external: false, needsInvite: false, member: false, rank: { lastname: i, firstname: i, email: i } }));
    const index = build(users);
    const ask = (term: string) => index.search({ terms: [term], includeExternal: true, filter: {}, sortBy: 'email', direction: 'DESC', offset: 0, size: 5 }).total;
    assert.equal(ask('bc'), 0);
    assert.equal(ask('b\0c'), 0);
    assert.equal(ask('\0'), 0);
    assert.equal(ask('d'), 1);
  });

  it('refuses a filter on room membership without the members', () => {
    const index = build([]);
    assert.throws(() => index.search({ terms: ['a'], includeExternal: true, filter: { roomMember: true }, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }));
  });

  it('an index of no users answers nothing', () => {
    assert.deepEqual(build([]).search({ terms: ['a'], includeExternal: true, filter: {}, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }), { total: 0, seqs: [] });
  });
});

describe('SearchIndexBuilder', () => {
  const user = (seq: number): IndexedUser => ({ seq, searchKey: `k${seq}`, external: false, needsInvite: false });

  it('gives no index when the pieces do not fit together', () => {
    const cases: [string, (builder: SearchIndexBuilder) => void][] = [
      ['users out of order', (b) => b.addUsers([user(2), user(1)])],
      ['more users than counted', (b) => b.addUsers([user(1), user(2), user(3)])],
      ['fewer users than counted', (b) => b.addUsers([user(1)])],
      ['an order naming an unknown user', (b) => (b.addUsers([user(1), user(2)]), FIELDS.forEach((f) => b.addOrder(f, [1, 7])))],
      ['an order too long', (b) => (b.addUsers([user(1), user(2)]), FIELDS.forEach((f) => b.addOrder(f, [1, 2, 1])))],
      ['an order missing', (b) => (b.addUsers([user(1), user(2)]), b.addOrder('email', [1, 2]))],
    ];
    for (const [name, feed] of cases) {
      const builder = new SearchIndexBuilder(1, 2);
      feed(builder);
      assert.equal(builder.parts(), undefined, name);
    }
  });

  it('a user who is not indexed makes room members unknown', () => {
    const index = build([{ ...user(1), member: true, rank: { lastname: 0, firstname: 0, email: 0 } }]);
    assert.equal(index.roomMembers([1, 2]), undefined);
    assert.ok(index.roomMembers([1])?.has(0));
  });
});
