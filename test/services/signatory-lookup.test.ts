import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';
import type { ChangeSource } from '../../src/lib/change-scoped-cache.ts';
import { SignatoryLookup } from '../../src/services/signatory-lookup.ts';
import type { SortField } from '../../src/domain/signatory-rules.ts';

/*
 * Property test: the whole lookup response equals an independent model of
 * contract section 3, over random directories and random queries.
 */

interface ModelUser {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  external: boolean;
  status: 'active' | 'pending' | 'suspended';
}
interface ModelOrg {
  id: string;
  externalSignatories: boolean;
  users: ModelUser[];
  rooms: { id: string; members: string[] }[];
}

// Pieces chosen to collide under folding, case and code-point order.
const NAME_PIECES = ['an', 'An', 'ÄN', 'ä', 'é', 'e', 'E\u0301', 'ß', 'ss', 'İ', 'i', 'ø', 'o', 'ﬁ', 'fi', '😀', '\uFF5E', '%', '_', '\\', "'", ' ', 'z', 'Zo'];
const namePart = fc.option(
  fc.array(fc.constantFrom(...NAME_PIECES), { minLength: 0, maxLength: 4 }).map((parts) => parts.join('')),
  { nil: null, freq: 5 },
);

const userArb = (index: number) =>
  fc
    .record({
      firstname: namePart,
      lastname: namePart,
      emailLocal: fc.array(fc.constantFrom('a', 'B', 'ä', '_', '%', '.', 'z'), { minLength: 1, maxLength: 4 }).map((p) => p.join('')),
      external: fc.boolean(),
      pending: fc.boolean(),
    })
    .map((u) => ({
      id: `u-${index}`,
      firstname: u.firstname,
      lastname: u.lastname,
      // The index keeps emails unique ignoring case.
      email: `${u.emailLocal}${index}@Example.test`,
      external: u.external,
      status: u.pending ? ('pending' as const) : ('active' as const),
    }));

const orgArb = (orgIndex: number): fc.Arbitrary<ModelOrg> =>
  fc.integer({ min: 0, max: 40 }).chain((count) =>
    fc
      .record({
        externalSignatories: fc.boolean(),
        users: fc.tuple(...Array.from({ length: count }, (_, i) => userArb(i))),
        memberBits: fc.array(fc.boolean(), { minLength: count, maxLength: count }),
      })
      .map(({ externalSignatories, users, memberBits }) => ({
        id: `org-${orgIndex}`,
        externalSignatories,
        users,
        rooms: [
          { id: 'room', members: users.filter((_, i) => memberBits[i]).map((u) => u.id) },
          { id: 'empty', members: [] },
        ],
      })),
  );

const fold = (s: string | null) => (s ?? '').normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
const utf8Compare = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

interface Query {
  searchQuery?: string;
  page?: number;
  size?: number;
  sortBy?: string;
  sortDirection?: string;
  roomMember?: string;
  requiresInvitation?: string;
  purpose?: string;
  room: string;
}

function model(org: ModelOrg, q: Query, maxPageSize: number) {
  const room = org.rooms.find((r) => r.id === q.room)!;
  const members = new Set(room.members);
  const rows = org.users
    .filter((u) => u.status !== 'suspended' && (org.externalSignatories || !u.external))
    .map((u) => {
      const roomMember = members.has(u.id);
      const requiresInvitation = !roomMember && (u.external || u.status === 'pending');
      return { u, roomMember, requiresInvitation };
    })
    .filter(({ u, roomMember, requiresInvitation }) => {
      const purpose = q.purpose?.toUpperCase();
      if (purpose === 'SIGNING_REQUEST_SIGNATORY' && !roomMember) return false;
      if (purpose === 'SIGNATORY_INVITATION' && roomMember) return false;
      if (purpose === 'PERMISSION_INVITATION' && (roomMember || u.external)) return false;
      if (purpose === undefined) {
        if (q.roomMember !== undefined && String(roomMember) !== q.roomMember.toLowerCase()) return false;
        if (q.requiresInvitation !== undefined && String(requiresInvitation) !== q.requiresInvitation.toLowerCase()) return false;
      }
      // A URL carries UTF-8, so a lone surrogate arrives as U+FFFD.
      const terms = (q.searchQuery ?? '')
        .toWellFormed()
        .trim()
        .split(/\s+/)
        .filter((t) => t !== '')
        .map(fold);
      return terms.every((t) => [u.firstname, u.lastname, u.email].some((field) => fold(field).includes(t)));
    });
  const sortBy = (q.sortBy ?? 'lastname').toLowerCase() as 'firstname' | 'lastname' | 'email';
  const fields = [sortBy, ...(['lastname', 'firstname', 'email'] as const).filter((f) => f !== sortBy)];
  const sign = (q.sortDirection ?? 'ASC').toUpperCase() === 'DESC' ? -1 : 1;
  // Each row's sort key folded once, not at every comparison.
  const keys = new Map(rows.map((row) => [row, [...fields.map((f) => fold(row.u[f])), row.u.id]]));
  rows.sort((a, b) => {
    const [x, y] = [keys.get(a)!, keys.get(b)!];
    for (let i = 0; i < x.length; i++) {
      const c = utf8Compare(x[i]!, y[i]!);
      if (c !== 0) return sign * c;
    }
    return 0;
  });
  const page = q.page ?? 0;
  const size = Math.min(q.size ?? 2000, maxPageSize);
  const content = rows.slice(page * size, page * size + size).map(({ u, roomMember, requiresInvitation }) => ({
    displayName: [u.firstname, u.lastname].filter((p) => p !== null && p !== '').join(' ') || u.email,
    email: u.email,
    firstname: u.firstname,
    lastname: u.lastname,
    requiresInvitation,
    roomMember,
  }));
  const totalPages = Math.ceil(rows.length / size);
  const sort = { empty: false, sorted: true, unsorted: false };
  return {
    content,
    empty: content.length === 0,
    first: page === 0,
    last: page + 1 >= totalPages,
    number: page,
    numberOfElements: content.length,
    size,
    totalElements: rows.length,
    totalPages,
    sort,
    pageable: { offset: page * size, pageNumber: page, pageSize: size, paged: true, unpaged: false, sort },
  };
}

const caseVariants = (value: string) => fc.constantFrom(value, value.toLowerCase(), value.toUpperCase());
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

/** Slices of one user's fields run together: they often span two fields, which must not match. */
const spanningSlice = (org: ModelOrg) =>
  org.users.length === 0
    ? fc.constant('x')
    : fc
        .record({ user: fc.constantFrom(...org.users), start: fc.nat(30), length: fc.integer({ min: 1, max: 6 }), upper: fc.boolean() })
        .map(({ user, start, length, upper }) => {
          const joined = `${user.firstname ?? ''}${user.lastname ?? ''}${user.email}`;
          const slice = joined.slice(start % Math.max(1, joined.length), (start % Math.max(1, joined.length)) + length);
          return upper ? slice.toUpperCase() : slice;
        });

const queryArb = (orgs: ModelOrg[]) =>
  fc.integer({ min: 0, max: orgs.length - 1 }).chain((org) =>
    fc.record(
      {
        org: fc.constant(org),
        room: fc.constantFrom('room', 'empty'),
        searchQuery: maybe(
          fc.oneof(
            fc.array(fc.constantFrom(...NAME_PIECES, 'a', 'B', '1', '@', '.', 'test', ' ', '\t'), { maxLength: 6 }).map((p) => p.join('')),
            fc.string({ maxLength: 6 }),
            spanningSlice(orgs[org]!),
            fc.tuple(spanningSlice(orgs[org]!), spanningSlice(orgs[org]!)).map(([a, b]) => `${a} ${b}`),
          ),
        ),
        page: maybe(fc.integer({ min: 0, max: 6 })),
        size: maybe(fc.integer({ min: 1, max: 12 })),
        sortBy: maybe(fc.constantFrom('firstname', 'lastname', 'email').chain(caseVariants)),
        sortDirection: maybe(fc.constantFrom('ASC', 'desc', 'Desc', 'asc')),
        roomMember: maybe(fc.constantFrom('true', 'false', 'TRUE', 'False')),
        requiresInvitation: maybe(fc.constantFrom('true', 'false', 'tRuE')),
        // As spelled: only sortBy and sortDirection are case-insensitive (contract section 3).
        purpose: maybe(fc.constantFrom('SIGNING_REQUEST_SIGNATORY', 'SIGNATORY_INVITATION', 'PERMISSION_INVITATION', 'SIGNING_REQUEST_DELIVERY_RECIPIENT')),
      },
      { requiredKeys: ['org', 'room'] },
    ),
  );

/**
 * Lookups with search terms are answered by the database, or, for organizations large enough, by
 * an in-memory index (src/domain/search-index.ts): the suite runs once each way, with every
 * organization indexed in the second.
 */
const MODES: { name: string; env: Record<string, string>; indexed: boolean }[] = [
  { name: 'answered by the database', env: { SIGNROOM_SEARCH_MEMORY_MB: '0' }, indexed: false },
  { name: 'answered by the in-memory search index', env: { SIGNROOM_SEARCH_MIN_USERS: '0' }, indexed: true },
];

for (const mode of MODES)
  describe(`signatory lookup against a model of the contract, ${mode.name}`, () => {
    let t: TestApp;
    let orgs: ModelOrg[];
    const MAX_PAGE_SIZE = 10;

    /** With the index on: lookups that ask for every organization's index and rooms, until all are loaded at the current version. */
    const loadSearchIndexes = async () => {
      if (!mode.indexed) return;
      let status = { organizations: 0, loading: 0 };
      // First the organizations' indexes, then (asked for by a lookup the index answers) the rooms' members.
      for (const pass of ['organizations', 'rooms']) {
        for (const org of orgs) {
          for (const room of org.rooms) {
            const url = `${LOOKUP(org.id, room.id)}?searchQuery=warm-${pass}-${Date.now()}&roomMember=true`;
            await t.app.inject({ url, headers: { authorization: basic('root', 'root-password') } });
          }
        }
        do {
          await new Promise((resolve) => setTimeout(resolve, 20));
          status = (await t.app.inject('/readyz')).json().searchIndexes;
        } while (status.loading > 0);
      }
      assert.equal(status.organizations, orgs.length, 'every organization is indexed');
    };

    before(async () => {
      t = await startTestApp({ SIGNROOM_MAX_PAGE_SIZE: String(MAX_PAGE_SIZE), ...mode.env });
      orgs = Array.from({ length: 12 }, (_, i) => fc.sample(orgArb(i), { numRuns: 1, seed: 1000 + i })[0]!);
      await t.importDirectory({
        organizations: orgs.map((org) => ({ ...org, settings: { externalSignatories: org.externalSignatories } })),
        credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
      });
      await loadSearchIndexes();
    });
    after(async () => t.close());

    /** Asks the app and checks its answer is exactly the model's. */
    const answersLikeTheModel = async (org: ModelOrg, query: Query) => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) {
        if (key !== 'room' && value !== undefined) params.set(key, String(value));
      }
      const response = await t.app.inject({ url: `${LOOKUP(org.id, query.room)}?${params}`, headers: { authorization: basic('root', 'root-password') } });
      assert.equal(response.statusCode, 200, response.body);
      assert.deepEqual(response.json(), model(org, query, MAX_PAGE_SIZE));
    };
    /** Random queries over the current `orgs`, each answered exactly as the model answers it. */
    const randomQueriesAnswerLikeTheModel = () =>
      fc.asyncProperty(queryArb(orgs), ({ org: index, ...query }) => answersLikeTheModel(orgs[index]!, query as Query));
    /** The same queries before and after a change, so cached answers would show. */
    const FIXED_QUERIES: Query[] = [
      { room: 'room' },
      { room: 'room', purpose: 'SIGNATORY_INVITATION', sortBy: 'email' },
      { room: 'room', searchQuery: 'an', sortDirection: 'DESC' },
      { room: 'room', roomMember: 'true', page: 1, size: 2 },
    ];

    it('answers every random query exactly like the model', async () => {
      await fc.assert(randomQueriesAnswerLikeTheModel(), { numRuns: 800 });
    });

    it('answers like the model again after an import changes the directory', async () => {
      // The same app: counts and pages it cached for the old directory must not answer for the new one.
      for (const org of orgs) for (const query of FIXED_QUERIES) await answersLikeTheModel(org, query);
      orgs = orgs.map((org, index) =>
        index % 2 === 1
          ? org
          : {
              ...org,
              // Some users change, two join (the index in memory is updated with just these), and one room's members are replaced.
              users: [
                ...org.users.map((user, k) => (k % 3 === 0 ? { ...user, lastname: `${user.lastname ?? ''}ß`, external: !user.external } : user)),
                ...[0, 1].map((k) => fc.sample(userArb(org.users.length + k), { numRuns: 1, seed: 2000 + index + k })[0]!),
              ],
              rooms: [{ ...org.rooms[0]!, members: org.rooms[0]!.members.slice(1) }, ...org.rooms.slice(1)],
            },
      );
      await t.importDirectory({
        // The unchanged organizations name their rooms without members: the members stay as they are.
        organizations: orgs.map((org, index) => ({
          ...org,
          rooms: index % 2 === 1 ? org.rooms.map((room) => ({ id: room.id })) : org.rooms,
          settings: { externalSignatories: org.externalSignatories },
        })),
      });
      // Before the indexes of the new version are loaded (the database answers), and after.
      for (const org of orgs) for (const query of FIXED_QUERIES) await answersLikeTheModel(org, query);
      await loadSearchIndexes();
      await fc.assert(randomQueriesAnswerLikeTheModel(), { numRuns: 800 });
    });

    it('pages through a whole result without repeating or skipping anyone', async () => {
      const auth = basic('root', 'root-password');
      const org = orgs.reduce((a, b) => (a.users.length >= b.users.length ? a : b));
      for (const sortBy of ['firstname', 'lastname', 'email']) {
        for (const sortDirection of ['ASC', 'DESC']) {
          const seen: string[] = [];
          for (let page = 0; ; page++) {
            const response = await t.app.inject({
              url: `${LOOKUP(org.id, 'room')}?size=3&page=${page}&sortBy=${sortBy}&sortDirection=${sortDirection}`,
              headers: { authorization: auth },
            });
            const body = response.json<{ content: { email: string }[]; last: boolean }>();
            seen.push(...body.content.map((s) => s.email));
            if (body.last) break;
          }
          const expected = model(org, { room: 'room', sortBy, sortDirection, size: 2000 }, 2000).content.map((s) => s.email);
          assert.deepEqual(seen, expected);
          assert.equal(new Set(seen).size, seen.length);
        }
      }
    });
  });

/**
 * A directory large enough for the in-memory index's ways of searching a room to differ: a room of
 * 40% of the users (scanned from one member's key to the next), one of 1% (each member's key
 * checked), an empty one; common terms (in names and emails, accented or not), external and
 * pending users, members and non-members of each kind.
 */
function largeRoomOrg(id: string, externalSignatories: boolean): ModelOrg {
  const FIRST = ['Anna', 'Ännä', 'Marie', 'Hannah', 'Jo', 'Mårten', null, 'Élodie'];
  const LAST = ['Marsh', 'Bannister', 'Omar', 'Lee', 'Müller', null, 'Ng'];
  const users: ModelUser[] = Array.from({ length: 4_000 }, (_, i) => {
    const firstname = FIRST[(i * 7) % FIRST.length]!;
    const lastname = LAST[(i * 3 + (i >> 4)) % LAST.length]!;
    return {
      id: `u${String(i).padStart(4, '0')}`,
      firstname,
      lastname,
      email: `${(firstname ?? 'x').toLowerCase()}.${i}@${i % 9 === 0 ? 'partner' : id}.test`,
      external: i % 9 === 0,
      status: i % 31 === 0 ? 'suspended' : i % 5 === 0 ? 'pending' : 'active',
    };
  });
  return {
    id,
    externalSignatories,
    users,
    rooms: [
      { id: 'large', members: users.filter((_, i) => (i * 13) % 5 < 2).map((u) => u.id) },
      { id: 'few', members: users.filter((_, i) => i % 100 === 7).map((u) => u.id) },
      { id: 'empty', members: [] },
    ],
  };
}

for (const mode of MODES)
  describe(`signatory lookup in large rooms against the model, every purpose with terms, ${mode.name}`, () => {
    let t: TestApp;
    const MAX_PAGE_SIZE = 20;
    const auth = basic('root', 'root-password');
    const orgs = [largeRoomOrg('big', true), largeRoomOrg('closed', false)];

    before(async () => {
      t = await startTestApp({ SIGNROOM_MAX_PAGE_SIZE: String(MAX_PAGE_SIZE), ...mode.env });
      await t.importDirectory({
        organizations: orgs.map((org) => ({ ...org, settings: { externalSignatories: org.externalSignatories } })),
        credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
      });
      if (!mode.indexed) return;
      // A lookup without a filter on members has each index loaded; the largest rooms' members follow it unasked.
      for (const org of orgs) await t.app.inject({ url: `${LOOKUP(org.id, 'large')}?searchQuery=warm`, headers: { authorization: auth } });
      for (let status = { loading: 1 }; status.loading > 0;) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        status = (await t.app.inject('/readyz')).json().searchIndexes;
      }
    });
    after(async () => t.close());

    if (mode.indexed)
      it('holds the members of the rooms that have any before a lookup asks for them', async () => {
        for (const org of orgs) {
          const [row] = await t.sql<{ version: number | string }>(sql`SELECT directory_version AS version FROM organizations WHERE id = ${org.id}`);
          const index = t.app.searchIndexes.index(org.id, Number(row!.version));
          assert.ok(index !== undefined, `the index of ${org.id} is held`);
          for (const room of ['large', 'few']) {
            const members = t.app.searchIndexes.members(org.id, index, room);
            assert.equal(members?.size, org.rooms.find((r) => r.id === room)!.members.length, `${org.id}/${room}`);
          }
        }
      });

    it('answers every purpose and flag with common terms exactly like the model, in every room', async () => {
      const filters: Pick<Query, 'purpose' | 'roomMember' | 'requiresInvitation'>[] = [
        { purpose: 'SIGNING_REQUEST_SIGNATORY' },
        { purpose: 'SIGNATORY_INVITATION' },
        { purpose: 'PERMISSION_INVITATION' },
        { purpose: 'SIGNING_REQUEST_DELIVERY_RECIPIENT' },
        {},
        { roomMember: 'true' },
        { roomMember: 'false', requiresInvitation: 'true' },
        { requiresInvitation: 'false' },
      ];
      const terms = ['ann', 'mar', 'an', 'partner', 'ANN MAR', 'müller .1', 'zzz'];
      let turn = 0;
      for (const org of orgs) {
        for (const room of ['large', 'few', 'empty']) {
          for (const filter of filters) {
            for (const searchQuery of terms) {
              turn += 1;
              const query: Query = {
                room,
                searchQuery,
                ...filter,
                sortBy: ['lastname', 'firstname', 'email'][turn % 3]!,
                sortDirection: turn % 2 === 0 ? 'ASC' : 'DESC',
                page: [0, 0, 1, 7][turn % 4]!,
                size: [20, 7][turn % 2]!,
              };
              const params = new URLSearchParams(Object.entries(query).flatMap(([key, value]) => (key === 'room' ? [] : [[key, String(value)]])));
              const response = await t.app.inject({ url: `${LOOKUP(org.id, room)}?${params}`, headers: { authorization: auth } });
              assert.equal(response.statusCode, 200, response.body);
              assert.deepEqual(response.json(), model(org, query, MAX_PAGE_SIZE), `${org.id} ${JSON.stringify(query)}`);
            }
          }
        }
      }
    });
  });

/** One change an administrator makes through the directory API (contract section 8). */
type Write =
  | { kind: 'create'; user: ModelUser }
  | { kind: 'patch'; at: number; change: Partial<Omit<ModelUser, 'id'>> }
  | { kind: 'delete'; at: number }
  | { kind: 'member'; at: number; add: boolean };

const writeArb = (serial: number): fc.Arbitrary<Write> =>
  fc.oneof(
    userArb(1000 + serial).map((user): Write => ({ kind: 'create', user: { ...user, id: `w-${serial}` } })),
    fc
      .record(
        {
          firstname: namePart,
          lastname: namePart,
          email: fc.constantFrom('a', 'Ä', 'z_').map((local) => `${local}${serial}@Example.test`),
          external: fc.boolean(),
          status: fc.constantFrom('active' as const, 'pending' as const, 'suspended' as const),
        },
        { requiredKeys: [] },
      )
      .chain((change) => fc.nat().map((at): Write => ({ kind: 'patch', at, change }))),
    fc.nat().map((at): Write => ({ kind: 'delete', at })),
    fc.record({ at: fc.nat(), add: fc.boolean() }).map(({ at, add }): Write => ({ kind: 'member', at, add })),
  );

for (const mode of MODES)
  describe(`signatory lookup against the model after REST writes, ${mode.name}`, () => {
    let t: TestApp;
    let org: ModelOrg;
    const MAX_PAGE_SIZE = 10;
    const auth = basic('root', 'root-password');
    const API = `/admin/api/v3/organizations`;

    before(async () => {
      t = await startTestApp({ SIGNROOM_MAX_PAGE_SIZE: String(MAX_PAGE_SIZE), ...mode.env });
      org = fc.sample(orgArb(0), { numRuns: 1, seed: 3000 })[0]!;
      await t.importDirectory({
        organizations: [{ ...org, settings: { externalSignatories: org.externalSignatories } }],
        credentials: [{ username: 'root', password: 'root-password', organizations: '*' }],
      });
      // With the index on: held (with the room's members) before the first write, so every write is laid over it.
      if (mode.indexed) {
        for (const query of ['warm', 'warm-members&roomMember=true']) {
          await t.app.inject({ url: `${LOOKUP(org.id, 'room')}?searchQuery=${query}`, headers: { authorization: auth } });
          for (let status = { loading: 1 }; status.loading > 0;) {
            await new Promise((resolve) => setTimeout(resolve, 20));
            status = (await t.app.inject('/readyz')).json().searchIndexes;
          }
        }
      }
    });
    after(async () => t.close());

    /** Sends the write and changes the model as the contract says it changes the directory. */
    const apply = async (write: Write) => {
      const send = (method: 'POST' | 'PATCH' | 'DELETE' | 'PUT', url: string, body?: unknown) =>
        t.app.inject({
          method,
          url: `${API}/${org.id}${url}`,
          headers: { authorization: auth, 'content-type': 'application/json' },
          ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
        });
      const target = org.users.length === 0 ? undefined : org.users[(write as { at: number }).at % org.users.length];
      const room = org.rooms[0]!;
      if (write.kind === 'create') {
        const response = await send('POST', '/users', write.user);
        assert.equal(response.statusCode, 201, response.body);
        org.users.push(write.user);
      } else if (target === undefined) {
        return;
      } else if (write.kind === 'patch') {
        const response = await send('PATCH', `/users/${target.id}`, write.change);
        assert.equal(response.statusCode, 200, response.body);
        Object.assign(target, write.change);
      } else if (write.kind === 'delete') {
        assert.equal((await send('DELETE', `/users/${target.id}`)).statusCode, 204);
        org.users = org.users.filter((user) => user !== target);
        for (const each of org.rooms) each.members = each.members.filter((id) => id !== target.id);
      } else {
        assert.equal((await send(write.add ? 'PUT' : 'DELETE', `/rooms/room/members/${target.id}`)).statusCode, 204);
        room.members = room.members.filter((id) => id !== target.id);
        if (write.add) room.members.push(target.id);
      }
    };

    const answersLikeTheModel = async (query: Query) => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) {
        if (key !== 'room' && value !== undefined) params.set(key, String(value));
      }
      const response = await t.app.inject({ url: `${LOOKUP(org.id, query.room)}?${params}`, headers: { authorization: auth } });
      assert.equal(response.statusCode, 200, response.body);
      assert.deepEqual(response.json(), model(org, query, MAX_PAGE_SIZE), `after the writes, ${JSON.stringify(query)}`);
    };

    it('shows at once a change that leaves the search keys as they were (letter case, accents)', async () => {
      const user: ModelUser = { id: 'case-1', firstname: 'Zoe', lastname: 'Casey', email: 'case.one@Example.test', external: false, status: 'active' };
      await apply({ kind: 'create', user });
      const query: Query = { room: 'room', searchQuery: 'casey', sortBy: 'email' };
      for (const firstname of ['Zoë', 'ZOË', 'Zoe', 'zoë']) {
        await answersLikeTheModel(query);
        await apply({ kind: 'patch', at: org.users.indexOf(user), change: { firstname } });
        await answersLikeTheModel(query);
      }
    });

    if (mode.indexed)
      it('answers like the model when the index has taken in writes after the version the scope was read at', async () => {
        // A lookup service whose scopes stay as first read (its change source never moves, and it
        // takes none from the index's reads of the changes, which are of the index's version):
        // after each write its lookups are of an older version than the index, which takes the
        // write in, as a lookup's are when commits land between its scope read and its answer. It
        // must not answer from the index at its own version then, nor mix the two versions.
        const still: ChangeSource = { token: () => 1, catchUp: () => undefined, about: () => still };
        const indexes = new Proxy(t.app.searchIndexes, {
          get: (target, key) => {
            if (key === 'scopeAsOf') return async () => undefined;
            const value: unknown = Reflect.get(target, key, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        const lookup = new SignatoryLookup(t.app.database.db, MAX_PAGE_SIZE, { changes: still, indexes });
        const ask = async (query: Query & { sortBy: SortField }) => {
          const { searchQuery, sortBy } = query;
          const request = { page: 0, size: MAX_PAGE_SIZE, sortBy, sortDirection: 'ASC' as const, ...(searchQuery !== undefined ? { searchQuery } : {}) };
          return JSON.parse((await lookup.lookup(org.id, query.room, request)).toString()) as unknown;
        };
        const version = async () =>
          Number((await t.sql<{ v: number | string }>(sql`SELECT directory_version AS v FROM organizations WHERE id = ${org.id}`))[0]!.v);
        // The scope is read (and kept) once: every lookup below starts from the version before the
        // writes. (By a lookup asked only here: its answer is kept under that version.)
        await ask({ room: 'room', searchQuery: 'scope', sortBy: 'lastname' });
        for (const [serial, sortBy] of (['firstname', 'email', 'lastname'] as const).entries()) {
          // "e" is in every email written before these (…@Example.test), and nowhere in these.
          await apply({
            kind: 'create',
            user: { id: `ahead-${serial}`, firstname: 'Zq', lastname: 'Aaq', email: `zq${serial}@zq.io`, external: false, status: 'active' },
          });
          const now = await version();
          await t.app.searchIndexes.catchUp(org.id, now, 5000);
          assert.ok(t.app.searchIndexes.heldAt(org.id, now) !== undefined, 'the index took the write in');
          // A lookup the new users cannot touch, and one they do; each of a sort not asked before,
          // so no answer is kept for it under the older version.
          const untouched = { room: 'room', searchQuery: 'e', sortBy };
          assert.deepEqual(await ask(untouched), model(org, untouched, MAX_PAGE_SIZE), `with "e", after ${serial + 1} writes`);
          // No terms: each new user is a candidate.
          const touched = { room: 'room', sortBy };
          assert.deepEqual(await ask(touched), model(org, touched, MAX_PAGE_SIZE), `without terms, after ${serial + 1} writes`);
        }
      });

    it('answers every lookup started after a write as the model of the directory after it', async () => {
      const writes = Array.from({ length: 80 }, (_, serial) => fc.sample(writeArb(serial), { numRuns: 1, seed: 4000 + serial })[0]!);
      for (const [serial, write] of writes.entries()) {
        await apply(write);
        // A query with a term (the in-memory index, where one is held), and random ones.
        await answersLikeTheModel({ room: 'room', searchQuery: 'e', sortBy: 'email' });
        await answersLikeTheModel({ room: 'room', purpose: 'SIGNING_REQUEST_SIGNATORY' });
        // The index with the room's members (edited member by member, laid over what it holds).
        await answersLikeTheModel({ room: 'room', searchQuery: 'example', purpose: 'SIGNING_REQUEST_SIGNATORY' });
        // The same narrow lookups after every write: answers carried across versions when no change touches them.
        for (const local of ['a1', 'z_2', 'b', 'ä3']) {
          await answersLikeTheModel({ room: 'room', searchQuery: local });
          await answersLikeTheModel({ room: 'room', searchQuery: local, purpose: 'SIGNATORY_INVITATION', sortBy: 'email' });
        }
        await answersLikeTheModel({ room: 'room', searchQuery: 'example', purpose: 'SIGNATORY_INVITATION', sortBy: 'firstname' });
        // The same pages without terms after every write: looked for again in the order, or kept
        // where no change can have moved them (ahead of a page, within it, after it; a filter on
        // membership or none; the first page and a later one).
        for (const sortBy of ['lastname', 'firstname', 'email'])
          for (const sortDirection of ['ASC', 'DESC'])
            for (const page of [0, 2]) await answersLikeTheModel({ room: 'room', sortBy, sortDirection, page, size: 3 });
        await answersLikeTheModel({ room: 'room', requiresInvitation: 'true', sortDirection: 'DESC', size: 2 });
        await answersLikeTheModel({ room: 'room', purpose: 'PERMISSION_INVITATION', sortBy: 'email', page: 1, size: 2 });
        await answersLikeTheModel({ room: 'room', purpose: 'SIGNING_REQUEST_SIGNATORY', sortBy: 'firstname', size: 2 });
        for (const sample of fc.sample(queryArb([org]), { numRuns: 3, seed: 5000 + serial })) {
          const { org: _index, ...query } = sample;
          await answersLikeTheModel(query);
        }
      }
    });
  });
