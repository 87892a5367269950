import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  firstInOrder,
  placeAgainstPage,
  SearchIndex,
  SearchIndexBuilder,
  warmUp,
  type ChangedUser,
  type IndexedUser,
  type SearchIndexParts,
} from '../../src/domain/search-index.ts';
import { matchesFilter, sortKeyOrder, type SignatoryFilter, type SortDirection, type SortField } from '../../src/domain/signatory-rules.ts';

interface User extends IndexedUser {
  member: boolean;
  /** Where the user stands in each sort order (the database decides it; here, at random). */
  rank: Record<SortField, number>;
}

const PIECES = ['an', 'ä', 'ß', 'ss', '😀', 'x', '\n', 'é', '.', 'b'];
const keyArb = fc.array(fc.constantFrom(...PIECES), { maxLength: 6 }).map((parts) => parts.join(''));

const usersArb = fc
  .array(
    fc.record({
      searchKey: keyArb,
      external: fc.boolean(),
      needsInvite: fc.boolean(),
      candidate: fc.boolean(),
      member: fc.boolean(),
      gap: fc.integer({ min: 1, max: 5 }),
    }),
    { maxLength: 60 },
  )
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
          return { seq, searchKey: row.searchKey, external: row.external, needsInvite: row.needsInvite, candidate: row.candidate, member: row.member, rank };
        });
      }),
  );

const FIELDS: SortField[] = ['lastname', 'firstname', 'email'];

/**
 * Keys in segments of 1 to 8 users (a million users' index holds 65,536 in each), so that a few
 * users span several, and their filters by blocks of 1 to 4 (1,024), so that a segment has several.
 */
const shiftsArb = fc.record({ segmentShift: fc.integer({ min: 0, max: 3 }), filterBlockShift: fc.integer({ min: 0, max: 2 }), filtered: fc.boolean() });
/** `filtered`: the filters made, as after a load (otherwise scans read whole segments, as before they are). */
type Shifts = { segmentShift?: number; filterBlockShift?: number; filtered?: boolean };

/** The index of the parts, as a server holds it. */
function held(parts: SearchIndexParts, shifts?: Shifts): SearchIndex {
  const index = new SearchIndex(parts, shifts);
  if (shifts?.filtered === true) runToEnd(index.filtering());
  return index;
}

/** Builds the index as the loader does: users in pieces, then each order in pieces. */
function build(users: readonly User[], piece = 7, shifts?: Shifts): SearchIndex {
  const builder = new SearchIndexBuilder(3, users.length);
  for (let at = 0; at < users.length; at += piece) builder.addUsers(users.slice(at, at + piece));
  for (const field of FIELDS) {
    const order = [...users].sort((a, b) => a.rank[field] - b.rank[field]).map((user) => user.seq);
    for (let at = 0; at < order.length; at += piece) builder.addOrder(field, order.slice(at, at + piece));
  }
  const parts = builder.parts();
  assert.ok(parts !== undefined);
  return held(parts, shifts);
}

function model(
  users: readonly User[],
  search: { terms: string[]; includeExternal: boolean; filter: SignatoryFilter; sortBy: SortField; direction: SortDirection; offset: number; size: number },
) {
  const matching = users
    .filter((user) => search.terms.every((term) => user.searchKey.includes(term)))
    .filter(
      (user) =>
        user.candidate &&
        matchesFilter({ external: user.external, needsInvitation: user.needsInvite, roomMember: user.member }, search.includeExternal, search.filter),
    )
    .sort((a, b) => (a.rank[search.sortBy] - b.rank[search.sortBy]) * (search.direction === 'ASC' ? 1 : -1));
  return { total: matching.length, seqs: matching.slice(search.offset, search.offset + search.size).map((user) => user.seq) };
}

const searchArb = fc.record({
  terms: fc.array(
    fc.oneof(
      keyArb.filter((key) => key !== ''),
      fc.constantFrom('a', 'n', 's', '\u00e4'),
    ),
    { maxLength: 3 },
  ),
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
      fc.property(usersArb, searchArb, shiftsArb, (users, search, shifts) => {
        const index = build(users, 7, shifts);
        const members = index.roomMembers(users.filter((user) => user.member).map((user) => user.seq));
        assert.ok(members !== undefined);
        assert.deepEqual(index.search({ ...search, members }), model(users, search));
        // Without terms, the page alone, walked to without counting.
        assert.deepEqual(index.pageWithoutTerms({ ...search, members }), model(users, { ...search, terms: [] }).seqs);
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
      candidate: true,
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
    const users: User[] = ['ab', 'cd'].map((searchKey, i) => ({
      seq: i + 1,
      searchKey,
      external: false,
      needsInvite: false,
      candidate: true,
      member: false,
      rank: { lastname: i, firstname: i, email: i },
    }));
    const index = build(users);
    const ask = (term: string) =>
      index.search({ terms: [term], includeExternal: true, filter: {}, sortBy: 'email', direction: 'DESC', offset: 0, size: 5 }).total;
    assert.equal(ask('bc'), 0);
    assert.equal(ask('b\0c'), 0);
    assert.equal(ask('\0'), 0);
    assert.equal(ask('d'), 1);
  });

  it('finds a term from its rarest byte on, never where what comes before it belongs to another field or user', () => {
    // "a" is in most keys, "q" in few: "aq" is looked for at each "q", its "a" compared there.
    const keys = ['xa', 'qz', 'aq', 'a\nqz', 'qaq', 'zq', 'xaq\nq', ...Array.from({ length: 300 }, () => 'aaaaaaaaaa')];
    const users = keys.map((searchKey, i): User => ({
      seq: i + 1,
      searchKey,
      external: false,
      needsInvite: false,
      candidate: true,
      member: i % 2 === 0,
      rank: { lastname: i, firstname: i, email: i },
    }));
    const index = build(users);
    const ask = (terms: string[], filter: SignatoryFilter = {}) =>
      index.search({
        terms,
        includeExternal: true,
        filter,
        members: index.roomMembers(users.filter((u) => u.member).map((u) => u.seq)),
        sortBy: 'lastname',
        direction: 'ASC',
        offset: 0,
        size: 50,
      });
    assert.deepEqual(ask(['aq']), { total: 3, seqs: [3, 5, 7] });
    assert.deepEqual(ask(['aq'], { roomMember: true }), { total: 3, seqs: [3, 5, 7] });
    assert.deepEqual(ask(['aq'], { roomMember: false }), { total: 0, seqs: [] });
    assert.deepEqual(ask(['xaq']), { total: 1, seqs: [7] });
    assert.deepEqual(ask(['aqz']).total, 0);
  });

  it('refuses a filter on room membership without the members', () => {
    const index = build([]);
    assert.throws(() =>
      index.search({ terms: ['a'], includeExternal: true, filter: { roomMember: true }, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }),
    );
  });

  it('warms its search paths up without a term any user could type, on any index', () => {
    for (const users of [
      [],
      [
        {
          seq: 1,
          searchKey: 'ann\nsch\nann@x',
          external: false,
          needsInvite: false,
          candidate: true,
          member: false,
          rank: { lastname: 0, firstname: 0, email: 0 },
        },
      ],
    ]) {
      const index = build(users);
      warmUp(index);
      assert.equal(
        index.search({ terms: ['ann'], includeExternal: true, filter: {}, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }).total,
        users.length,
      );
    }
  });

  it('refuses segments of keys it cannot number (a shift outside 0 to 30)', () => {
    const builder = new SearchIndexBuilder(1, 0);
    const parts = builder.parts();
    assert.ok(parts !== undefined);
    for (const segmentShift of [-1, 31, 2.5]) assert.throws(() => new SearchIndex(parts, { segmentShift }), RangeError);
    for (const filterBlockShift of [-1, 31, 2.5]) assert.throws(() => new SearchIndex(parts, { filterBlockShift }), RangeError);
  });

  it('an index of no users answers nothing', () => {
    assert.deepEqual(build([]).search({ terms: ['a'], includeExternal: true, filter: {}, sortBy: 'email', direction: 'ASC', offset: 0, size: 5 }), {
      total: 0,
      seqs: [],
    });
  });
});

describe('SearchIndexBuilder', () => {
  const user = (seq: number): IndexedUser => ({ seq, searchKey: `k${seq}`, external: false, needsInvite: false, candidate: true });

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

/** A user as the database holds one: the three folded keys and the id decide where it sorts. */
interface StoredUser {
  seq: number;
  id: string;
  keys: Record<SortField, string>;
  external: boolean;
  needsInvite: boolean;
  candidate: boolean;
}

const asChanged = (user: StoredUser): ChangedUser => ({
  seq: user.seq,
  id: user.id,
  searchKey: [user.keys.firstname, user.keys.lastname, user.keys.email].join('\n'),
  sortKeys: user.keys,
  external: user.external,
  needsInvite: user.needsInvite,
  candidate: user.candidate,
});

/** The index the loader would read for these users: each order as the databases sort (keys byte-wise, then id). */
function read(users: readonly StoredUser[], version: number, shifts?: Shifts): SearchIndex {
  const builder = new SearchIndexBuilder(version, users.length);
  builder.addUsers(users.map(asChanged));
  const bytes = (s: string) => Buffer.from(s, 'utf8');
  for (const field of FIELDS) {
    const keyOrder = sortKeyOrder(field);
    const sorted = [...users].sort((a, b) => {
      for (const key of keyOrder) {
        const compared = Buffer.compare(bytes(a.keys[key]), bytes(b.keys[key]));
        if (compared !== 0) return compared;
      }
      return Buffer.compare(bytes(a.id), bytes(b.id));
    });
    builder.addOrder(
      field,
      sorted.map((user) => user.seq),
    );
  }
  const parts = builder.parts();
  assert.ok(parts !== undefined);
  return held(parts, shifts);
}

/** Pieces of names that collide under byte order: é before z, 😀 after every BMP character, '' first. */
const PIECES_OF_NAMES = ['an', 'é', 'e', 'z', '😀', '\uFF5E', ' ', 'b'];
const namePieceArb = fc.array(fc.constantFrom(...PIECES_OF_NAMES), { maxLength: 3 }).map((parts) => parts.join(''));

/** Each user's new keys and kind, for some of them. */
const rewriteArb = (names: fc.Arbitrary<string>) =>
  fc.array(
    fc.record({
      at: fc.nat(),
      firstname: names,
      lastname: names,
      email: namePieceArb,
      external: fc.boolean(),
      needsInvite: fc.boolean(),
      candidate: fc.boolean(),
    }),
    { maxLength: 12 },
  );
const newUsersArb = (names: fc.Arbitrary<string>) =>
  fc.array(
    fc.record({
      firstname: names,
      lastname: names,
      email: namePieceArb,
      external: fc.boolean(),
      needsInvite: fc.boolean(),
      candidate: fc.boolean(),
      gap: fc.integer({ min: 1, max: 3 }),
    }),
    { maxLength: 10 },
  );

type Rewrite = { at: number; firstname: string; lastname: string; email: string; external: boolean; needsInvite: boolean; candidate: boolean };
type NewUser = Omit<Rewrite, 'at'> & { gap: number };

/** The directory after some users are rewritten and some added (emails stay distinct: the index in them), and the changes in seq order. */
function evolve(
  users: readonly StoredUser[],
  rewrites: readonly Rewrite[],
  added: readonly NewUser[],
  idPrefix = '',
): { users: StoredUser[]; changed: ChangedUser[] } {
  const next = [...users];
  const changed = new Set<number>();
  for (const row of rewrites) {
    if (next.length === 0) break;
    const index = row.at % next.length;
    next[index] = {
      ...next[index]!,
      keys: { firstname: row.firstname, lastname: row.lastname, email: `${row.email}${index}@x` },
      external: row.external,
      needsInvite: row.needsInvite,
      candidate: row.candidate,
    };
    changed.add(index);
  }
  let seq = next.at(-1)?.seq ?? 0;
  for (const row of added) {
    const index = next.length;
    seq += row.gap;
    next.push({
      seq,
      id: `${idPrefix}u${index}`,
      keys: { firstname: row.firstname, lastname: row.lastname, email: `${row.email}${index}@x` },
      external: row.external,
      needsInvite: row.needsInvite,
      candidate: row.candidate,
    });
    changed.add(index);
  }
  return { users: next, changed: [...changed].sort((a, b) => a - b).map((index) => asChanged(next[index]!)) };
}

/** A directory, changed twice: what an index read whole, then updated twice, must answer like. */
const historyArb = (names = namePieceArb, ids: fc.Arbitrary<string> = fc.constant('')) =>
  fc.record({
    initial: newUsersArb(names).chain((first) => newUsersArb(names).map((second) => [...first, ...second])),
    one: rewriteArb(names),
    oneAdded: newUsersArb(names),
    two: rewriteArb(names),
    twoAdded: newUsersArb(names),
    ids,
    shifts: shiftsArb,
  });

/** Searches covering every order, direction, paging and filter, with terms from the names' pieces. */
function everySearch(users: readonly StoredUser[]) {
  // Terms of three bytes or more are looked for only in the blocks whose filters hold all their byte triples.
  const terms = [[], ['an'], ['e'], ['z'], ['😀'], ['@x'], ['an', 'e'], ['b', '1'], ['\uFF5E', ' '], ['ana'], ['zé', 'ban'], ['anéz']];
  const members = users.filter((_, index) => index % 3 === 0).map((user) => user.seq);
  // One member among many: each member's key is checked, not scanned from one member's key to the next.
  const fewMembers = users.slice(0, 1).map((user) => user.seq);
  const searches: (Parameters<SearchIndex['search']>[0] & { memberSeqs: number[] })[] = [];
  for (const searchTerms of terms) {
    for (const sortBy of FIELDS) {
      for (const direction of ['ASC', 'DESC'] as const) {
        for (const [offset, size] of [
          [0, 100],
          [1, 3],
          [5, 2],
        ] as const) {
          searches.push({
            terms: searchTerms,
            includeExternal: offset !== 1,
            filter: offset === 5 ? { requiresInvitation: true, roomMember: false } : offset === 1 ? { roomMember: true } : {},
            sortBy,
            direction,
            offset,
            size,
            memberSeqs: direction === 'DESC' && offset === 1 ? fewMembers : members,
          });
        }
      }
    }
  }
  return searches;
}

/** Runs steps (a generator that pauses) to their end. */
function runToEnd(steps: Generator<undefined, unknown, undefined>): void {
  while (steps.next().done !== true);
}

/** Both indexes answer every search alike, and know the same users. */
function assertAnswersAlike(updated: SearchIndex, whole: SearchIndex, users: readonly StoredUser[]) {
  assert.equal(updated.users, whole.users);
  for (const user of users) assert.equal(updated.userOf(user.seq), whole.userOf(user.seq));
  for (const { memberSeqs, ...search } of everySearch(users)) {
    const answer = (index: SearchIndex) => index.search({ ...search, members: index.roomMembers(memberSeqs)! });
    assert.deepEqual(answer(updated), answer(whole), JSON.stringify(search));
    if (search.terms.length === 0) {
      const page = (index: SearchIndex) => index.pageWithoutTerms({ ...search, members: index.roomMembers(memberSeqs)! });
      assert.deepEqual(page(updated), answer(whole).seqs, JSON.stringify(search));
    }
  }
}

describe('SearchIndex.withChanges', () => {
  it('answers like an index read whole after each change, changes laid over changes', () => {
    fc.assert(
      fc.property(historyArb(), ({ initial, one, oneAdded, two, twoAdded, shifts }) => {
        const start = evolve([], [], initial);
        const first = evolve(start.users, one, oneAdded);
        const second = evolve(first.users, two, twoAdded);
        const once = read(start.users, 3, shifts).withChanges(4, first.users.length, first.changed);
        assert.ok(once !== undefined, 'no two users sort alike, and no name holds the separator');
        assertAnswersAlike(once, read(first.users, 4), first.users);
        const twice = once.withChanges(5, second.users.length, second.changed);
        assert.ok(twice !== undefined);
        assertAnswersAlike(twice, read(second.users, 5), second.users);
        assert.equal(twice.version, 5);
        assert.ok(twice.changesLaidOver <= first.changed.length + second.changed.length);
        // Merged into a new base: the same answers and user numbers, nothing laid over, and changes still laid over it.
        const compacted = twice.compacted();
        assert.equal(compacted.changesLaidOver, 0);
        assert.equal(compacted.version, 5);
        assertAnswersAlike(compacted, read(second.users, 5), second.users);
        const third = evolve(second.users, one, oneAdded);
        const after = compacted.withChanges(6, third.users.length, third.changed);
        assert.ok(after !== undefined);
        assertAnswersAlike(after, read(third.users, 6), third.users);
      }),
      { numRuns: 300 },
    );
  });

  it('merges block filters with the changes: the merged index finds what one read whole does, with terms never searched for', () => {
    fc.assert(
      fc.property(historyArb(), ({ initial, one, oneAdded, shifts }) => {
        const start = evolve([], [], initial);
        const first = evolve(start.users, one, oneAdded);
        // Every segment's filters made, as after a load: the merge carries them with the changed users' triples added.
        const base = read(start.users, 3, { ...shifts, filtered: true });
        const laid = base.withChanges(4, first.users.length, first.changed);
        assert.ok(laid !== undefined);
        assertAnswersAlike(laid.compacted(), read(first.users, 4), first.users);
      }),
      { numRuns: 300 },
    );
  });

  it('merged in steps while more changes are laid over: those laid over the merged index answer alike', () => {
    fc.assert(
      fc.property(historyArb(), ({ initial, one, oneAdded, two, twoAdded, shifts }) => {
        const start = evolve([], [], initial);
        const first = evolve(start.users, one, oneAdded);
        const second = evolve(first.users, two, twoAdded);
        const from = read(start.users, 3, shifts).withChanges(4, first.users.length, first.changed);
        assert.ok(from !== undefined);
        const steps = from.compaction();
        let step = steps.next();
        // Laid over the index being merged, between two of its steps.
        const later = from.withChanges(5, second.users.length, second.changed);
        assert.ok(later !== undefined);
        while (step.done !== true) step = steps.next();
        const merged = step.value;
        assert.equal(merged.changesLaidOver, 0);
        assertAnswersAlike(merged, read(first.users, 4), first.users);
        const rebased = later.rebasedOnto(merged, from);
        assert.ok(rebased !== undefined);
        assert.equal(rebased.version, 5);
        assert.ok(rebased.changesLaidOver <= second.changed.length);
        assertAnswersAlike(rebased, read(second.users, 5), second.users);
        // An index not laid over the merged one's base (read whole meanwhile) is not rebased.
        assert.equal(read(second.users, 5).rebasedOnto(merged, from), undefined);
      }),
      { numRuns: 300 },
    );
  });

  it('is never wrong when names hold the separator or users tie on every key: it gives up instead', () => {
    const names = fc.array(fc.constantFrom('a', '\n', 'b'), { maxLength: 2 }).map((parts) => parts.join(''));
    let gaveUp = 0;
    fc.assert(
      fc.property(historyArb(names, fc.constantFrom('', 'x')), ({ initial, one, oneAdded, ids }) => {
        // Emails alike too, so users tie on every key and only the id orders them.
        const tie = (users: StoredUser[]) => users.map((user) => ({ ...user, keys: { ...user.keys, email: 'same@x' } }));
        const start = evolve([], [], initial, ids);
        const first = evolve(start.users, one, oneAdded, ids);
        const tiedChanged = first.changed.map((user) => asChanged(tie(first.users).find((other) => other.seq === user.seq)!));
        for (const [from, to, changed] of [
          [start.users, first.users, first.changed],
          [tie(start.users), tie(first.users), tiedChanged],
        ] as const) {
          const updated = read(from, 3).withChanges(4, to.length, changed);
          if (updated === undefined) gaveUp += 1;
          else assertAnswersAlike(updated, read(to, 4), to);
        }
      }),
      { numRuns: 300 },
    );
    assert.ok(gaveUp > 0, 'some cases cannot be placed from the keys alone');
  });

  it('gives up on changes that do not fit the index', () => {
    const stored = (seq: number): StoredUser => ({
      seq,
      id: `u${seq}`,
      keys: { firstname: `f${seq}`, lastname: `l${seq}`, email: `e${seq}` },
      external: false,
      needsInvite: false,
      candidate: true,
    });
    const index = read([1, 5, 9].map(stored), 1);
    const user = (seq: number) => asChanged(stored(seq));
    assert.equal(index.withChanges(2, 3, [user(3)]), undefined, 'a seq between held ones is no user of this index');
    assert.equal(index.withChanges(2, 5, [user(12)]), undefined, 'a count that does not add up');
    assert.equal(index.withChanges(2, 4, [user(12)])?.users, 4);
    const added = index.withChanges(2, 4, [user(12)])!;
    assert.equal(added.withChanges(3, 5, [user(11)]), undefined, 'a new user before one added earlier would renumber it');
    assert.equal(added.withChanges(3, 5, [user(13)])?.users, 5);
  });

  it('leaves each index it was laid over answering as before: the arrays it shares are never written where that one reads', () => {
    fc.assert(
      fc.property(historyArb(), ({ initial, one, oneAdded, two, twoAdded, shifts }) => {
        const start = evolve([], [], initial);
        const first = evolve(start.users, one, oneAdded);
        const once = read(start.users, 3, shifts).withChanges(4, first.users.length, first.changed)!;
        // Two updates of the same index (a kind changed, users added, or neither), then each again.
        const second = evolve(first.users, two, twoAdded);
        const other = evolve(first.users, one, twoAdded);
        const twice = once.withChanges(5, second.users.length, second.changed)!;
        const otherTwice = once.withChanges(5, other.users.length, other.changed)!;
        const third = evolve(second.users, [], oneAdded);
        const thrice = twice.withChanges(6, third.users.length, third.changed)!;
        assertAnswersAlike(once, read(first.users, 4), first.users);
        assertAnswersAlike(twice, read(second.users, 5), second.users);
        assertAnswersAlike(otherTwice, read(other.users, 5), other.users);
        assertAnswersAlike(thrice, read(third.users, 6), third.users);
        const otherThird = evolve(other.users, [], twoAdded);
        assertAnswersAlike(otherTwice.withChanges(6, otherThird.users.length, otherThird.changed)!, read(otherThird.users, 6), otherThird.users);
        assertAnswersAlike(twice, read(second.users, 5), second.users);
        assertAnswersAlike(once, read(first.users, 4), first.users);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps room members, none of the users added after them a member', () => {
    const users = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((seq): StoredUser => ({
      seq,
      id: `u${seq}`,
      keys: { firstname: '', lastname: '', email: `e${seq}` },
      external: false,
      needsInvite: false,
      candidate: true,
    }));
    const some = read(users, 1).roomMembers([2, 9])!.extendedTo(17);
    assert.equal(some.bytes, 3);
    assert.deepEqual(
      [...Array(17).keys()].filter((user) => some.has(user)),
      [1, 8],
    );
  });
});

describe('firstInOrder', () => {
  it('gives the first values in either direction, as a whole sort does', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 1_000_000 }), { maxLength: 400 }),
        fc.nat(60),
        fc.constantFrom<SortDirection>('ASC', 'DESC'),
        (values, count, direction) => {
          const sorted = [...values].sort((a, b) => (direction === 'ASC' ? a - b : b - a));
          assert.deepEqual([...firstInOrder(Float64Array.from(values), count, direction)], sorted.slice(0, count));
        },
      ),
    );
  });
});

describe('SearchIndex at the sizes where its ways of searching change', () => {
  // 120,000 users: more matches than are ever listed (50,000) or sorted, a room of a quarter of them
  // (scanned from one member's key to the next) and one of a few (each member's key checked).
  const USERS = 120_000;
  const stored = (index: number, generation = 0): StoredUser => ({
    seq: 2 * index + 1,
    id: `u${String(index).padStart(6, '0')}`,
    keys: { firstname: `n${(index * 7 + generation) % 13}`, lastname: `l${index % 101}`, email: `${index}.g${generation}@x` },
    external: index % 17 === 0,
    needsInvite: index % 5 === 0,
    candidate: index % 97 !== 0,
  });
  /** Keys are ASCII here, so the strings' own order is the databases' byte order. */
  const readAscii = (users: readonly StoredUser[], version: number): SearchIndex => {
    const builder = new SearchIndexBuilder(version, users.length);
    builder.addUsers(users.map(asChanged));
    for (const field of FIELDS) {
      const keyOrder = sortKeyOrder(field);
      const key = (user: StoredUser) => [...keyOrder.map((name) => user.keys[name]), user.id];
      const keyed = users.map((user) => ({ user, key: key(user) }));
      keyed.sort((a, b) => {
        for (let i = 0; i < a.key.length; i++) if (a.key[i] !== b.key[i]) return a.key[i]! < b.key[i]! ? -1 : 1;
        return 0;
      });
      builder.addOrder(
        field,
        keyed.map(({ user }) => user.seq),
      );
    }
    const parts = builder.parts();
    assert.ok(parts !== undefined);
    return new SearchIndex(parts);
  };
  /** The answer as a plain filter and sort would give it. */
  const expected = (users: readonly StoredUser[], members: ReadonlySet<number>, search: Parameters<SearchIndex['search']>[0]) => {
    const keyOf = (user: StoredUser) => [...sortKeyOrder(search.sortBy).map((name) => user.keys[name]), user.id];
    const matching = users
      .filter((user) => search.terms.every((term) => [user.keys.firstname, user.keys.lastname, user.keys.email].join('\n').includes(term)))
      .filter(
        (user) =>
          user.candidate &&
          matchesFilter(
            { external: user.external, needsInvitation: user.needsInvite, roomMember: members.has(user.seq) },
            search.includeExternal,
            search.filter,
          ),
      )
      .map((user) => ({ user, key: keyOf(user) }))
      .sort((a, b) => {
        for (let i = 0; i < a.key.length; i++) if (a.key[i] !== b.key[i]) return (a.key[i]! < b.key[i]! ? -1 : 1) * (search.direction === 'ASC' ? 1 : -1);
        return 0;
      });
    return { total: matching.length, seqs: matching.slice(search.offset, search.offset + search.size).map(({ user }) => user.seq) };
  };
  const rooms = (users: readonly StoredUser[]) => ({
    quarter: users.filter((_, index) => index % 4 === 1).map((user) => user.seq),
    few: users.filter((_, index) => index % 500 === 3).map((user) => user.seq),
  });
  const SEARCHES: { terms: string[]; filter: SignatoryFilter; room: 'quarter' | 'few'; sortBy: SortField; direction: SortDirection; offset: number }[] = [
    // Everyone: no list, the order walked.
    { terms: ['@x'], filter: {}, room: 'quarter', sortBy: 'email', direction: 'ASC', offset: 70_000 },
    // Everyone, then a further term over many (a second scan, the matches listed again), then sorted or walked.
    { terms: ['@x', 'n1'], filter: {}, room: 'quarter', sortBy: 'lastname', direction: 'DESC', offset: 3 },
    { terms: ['@x', 'l7', 'g0'], filter: { roomMember: false }, room: 'quarter', sortBy: 'firstname', direction: 'ASC', offset: 0 },
    // Matches bunched at the far end of the order (the term in the field sorted by): the walk stops, they are sorted.
    { terms: ['n1'], filter: { roomMember: false }, room: 'quarter', sortBy: 'firstname', direction: 'DESC', offset: 25 },
    { terms: ['n0'], filter: {}, room: 'few', sortBy: 'firstname', direction: 'DESC', offset: 0 },
    // Only members: from one member's key to the next, or each member's key.
    { terms: ['n1'], filter: { roomMember: true }, room: 'quarter', sortBy: 'firstname', direction: 'ASC', offset: 10 },
    { terms: ['@x'], filter: { roomMember: true }, room: 'quarter', sortBy: 'email', direction: 'DESC', offset: 29_000 },
    { terms: ['9.g'], filter: { roomMember: true }, room: 'quarter', sortBy: 'lastname', direction: 'ASC', offset: 0 },
    { terms: ['n1'], filter: { roomMember: true, requiresInvitation: false }, room: 'few', sortBy: 'lastname', direction: 'ASC', offset: 0 },
    { terms: ['l3', 'n'], filter: { roomMember: true }, room: 'few', sortBy: 'email', direction: 'DESC', offset: 1 },
    { terms: ['n1'], filter: { roomMember: false, external: false }, room: 'few', sortBy: 'email', direction: 'ASC', offset: 40 },
    // A further term whose matches the base keeps (from the search before): those kept are marked, not each key looked at.
    { terms: ['l1'], filter: {}, room: 'few', sortBy: 'lastname', direction: 'ASC', offset: 0 },
    { terms: ['9.g', 'l1'], filter: { roomMember: false }, room: 'quarter', sortBy: 'lastname', direction: 'DESC', offset: 5 },
  ];

  /** Every search, with and without external users, answered as the plain filter and sort would. */
  const assertAnswersAsExpected = (index: SearchIndex, users: readonly StoredUser[]) => {
    const memberSeqs = rooms(users);
    for (const { room, ...search } of SEARCHES) {
      for (const includeExternal of [true, false]) {
        const asked = { ...search, includeExternal, size: 20 };
        const members = index.roomMembers(memberSeqs[room]);
        assert.ok(members !== undefined);
        assert.deepEqual(index.search({ ...asked, members }), expected(users, new Set(memberSeqs[room]), asked), JSON.stringify({ room, ...asked }));
      }
    }
  };

  it('answers as a plain filter and sort, read whole', () => {
    const users = Array.from({ length: USERS }, (_, index) => stored(index));
    assertAnswersAsExpected(readAscii(users, 1), users);
  });

  it('answers as a plain filter and sort with changes laid over (users changed and added, members among them)', () => {
    const users = Array.from({ length: USERS }, (_, index) => stored(index));
    const changed = Array.from({ length: 900 }, (_, k) => (k * 131) % USERS);
    const next = [...users];
    for (const index of changed) next[index] = stored(index, 1);
    for (let index = USERS; index < USERS + 300; index++) next.push(stored(index, 2));
    const changes = [...new Set([...changed, ...Array.from({ length: 300 }, (_, k) => USERS + k)])]
      .sort((a, b) => a - b)
      .map((index) => asChanged(next[index]!));
    const updated = readAscii(users, 1).withChanges(2, next.length, changes);
    assert.ok(updated !== undefined);
    assertAnswersAsExpected(updated, next);
    // Merged: its keys in two segments, both touched, the second with the users added.
    assertAnswersAsExpected(updated.compacted(), next);
  });
});

describe('placeAgainstPage', () => {
  /** A user as a lookup without terms sees one: its keys (first name, last name, email), kind bits, membership and the id that orders ties. */
  const personArb = fc.record({
    first: fc.constantFrom('', 'a', 'b', 'c'),
    last: fc.constantFrom('a', 'b', 'c'),
    email: fc.constantFrom('a', 'b'),
    // Kind bits: 1 external, 2 needs an invitation, 8 not a candidate (suspended or deleted).
    kind: fc.constantFrom(0, 1, 2, 3, 8, 9, 10, 11),
    member: fc.boolean(),
  });
  type Person = { first: string; last: string; email: string; kind: number; member: boolean; id: number };
  const keyOf = (p: Person) => `${p.first}\n${p.last}\n${p.email}`;
  const fieldOf = (p: Person, field: SortField) => (field === 'firstname' ? p.first : field === 'lastname' ? p.last : p.email);
  const isCandidate = (p: Person, includeExternal: boolean, filter: SignatoryFilter) =>
    (p.kind & 8) === 0 && matchesFilter({ external: (p.kind & 1) !== 0, needsInvitation: (p.kind & 2) !== 0, roomMember: p.member }, includeExternal, filter);
  /** The ids of the page, by a plain filter and sort. */
  const pageOf = (
    people: Person[],
    query: { includeExternal: boolean; filter: SignatoryFilter; sortBy: SortField; direction: SortDirection },
    offset: number,
    size: number,
  ) => {
    const sorted = people
      .filter((p) => isCandidate(p, query.includeExternal, query.filter))
      .sort((x, y) => {
        for (const field of sortKeyOrder(query.sortBy)) if (fieldOf(x, field) !== fieldOf(y, field)) return fieldOf(x, field) < fieldOf(y, field) ? -1 : 1;
        return x.id - y.id;
      });
    if (query.direction === 'DESC') sorted.reverse();
    return sorted.slice(offset, offset + size).map((p) => p.id);
  };

  it('a change that falls alike against a full page before and after, and not open, leaves the page as it was', () => {
    let standing = 0;
    fc.assert(
      fc.property(
        fc.array(personArb, { minLength: 1, maxLength: 25 }),
        fc.record({
          includeExternal: fc.boolean(),
          filter: fc.constantFrom<SignatoryFilter>({}, { roomMember: true }, { roomMember: false, external: false }, { requiresInvitation: true }),
          sortBy: fc.constantFrom<SortField>('lastname', 'firstname', 'email'),
          direction: fc.constantFrom<SortDirection>('ASC', 'DESC'),
        }),
        fc.nat(6),
        fc.integer({ min: 1, max: 4 }),
        fc.nat(),
        fc.option(personArb, { nil: undefined }),
        personArb,
        (rows, query, offset, size, at, old, now) => {
          const people = rows.map((row, id) => ({ ...row, id }));
          const page = pageOf(people, query, offset, size);
          if (page.length < size) return;
          const [first, last] = [people[page[0]!]!, people[page.at(-1)!]!];
          const keys = { first: keyOf(first), last: keyOf(last) };
          // The user who changes: one off the page, or a new one (no state before).
          const offPage = people.filter((p) => !page.includes(p.id));
          const target = old === undefined || offPage.length === 0 ? undefined : offPage[at % offPage.length]!;
          const before = target === undefined ? [] : [target];
          const changed = { ...now, id: target?.id ?? people.length };
          const stateOf = (p: Person | undefined) => (p === undefined ? undefined : { key: keyOf(p), kind: p.kind });
          const from = placeAgainstPage(stateOf(before[0]), keys, query);
          const to = placeAgainstPage(stateOf(changed), keys, query);
          if (from !== to || to === 'open') return;
          standing += 1;
          const after = [...people.filter((p) => p.id !== changed.id), changed];
          assert.deepEqual(pageOf(after, query, offset, size), page);
        },
      ),
      { numRuns: 3000 },
    );
    assert.ok(standing > 100, `pages found standing: ${standing}`);
  });

  it('is open for a user who ties with the first or last user of the page, or whose key does not split into three', () => {
    const query = { includeExternal: true, filter: {}, sortBy: 'lastname' as const, direction: 'ASC' as const };
    const page = { first: 'b\nb\nb', last: 'c\nc\nc' };
    assert.equal(placeAgainstPage({ key: 'b\nb\nb', kind: 0 }, page, query), 'open');
    assert.equal(placeAgainstPage({ key: 'c\nc\nc', kind: 0 }, page, query), 'open');
    assert.equal(placeAgainstPage({ key: 'a\nb', kind: 0 }, page, query), 'open');
    assert.equal(placeAgainstPage({ key: 'a\na\na', kind: 0 }, page, query), 'ahead');
    assert.equal(placeAgainstPage({ key: 'a\nd\na', kind: 0 }, page, query), 'outside');
    // Descending, the same page runs from c to b: d is ahead of it, a after it.
    const descending = { first: page.last, last: page.first };
    assert.equal(placeAgainstPage({ key: 'a\nd\na', kind: 0 }, descending, { ...query, direction: 'DESC' }), 'ahead');
    assert.equal(placeAgainstPage({ key: 'a\na\na', kind: 0 }, descending, { ...query, direction: 'DESC' }), 'outside');
    // Ahead, with a candidacy that hangs on membership: open; never a candidate: outside.
    assert.equal(placeAgainstPage({ key: 'a\na\na', kind: 0 }, page, { ...query, filter: { roomMember: true } }), 'open');
    assert.equal(placeAgainstPage({ key: 'a\na\na', kind: 8 }, page, query), 'outside');
  });
});
